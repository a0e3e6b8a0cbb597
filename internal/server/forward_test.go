package server

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/store"
)

// nodeDir is a fixed directory of the cluster's other nodes.
type nodeDir map[string]struct {
	url   string
	alive bool
}

func (d nodeDir) NodeURL(_ context.Context, id string) (string, bool, error) {
	n, ok := d[id]
	if !ok {
		return "", false, errdefs.ErrNotFound
	}
	return n.url, n.alive, nil
}

// TestForwardToOwner: a request about a sandbox another node runs —
// control API or data plane — is answered by that node, once (a request
// that was forwarded twice is never forwarded again), and a sandbox of
// a dead node is 503, not a silent 404.
func TestForwardToOwner(t *testing.T) {
	var mu sync.Mutex
	var seen []*http.Request
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Clone(context.Background()))
		mu.Unlock()
		w.Header().Set("X-Answered-By", "node-b")
		w.WriteHeader(http.StatusTeapot)
	}))
	defer other.Close()
	var st *store.Store
	e := newEnv(t, func(c *Config) { st = c.Keys.(*store.Store); c.NodeID = "node-a" })
	ctx := context.Background()
	for id, node := range map[string]string{"sbonb00000000000000b": "node-b", "sbondead0000000000dd": "node-c"} {
		if err := st.PutSandbox(ctx, &store.Sandbox{ID: id, TemplateID: "base", ClientID: node, State: "running",
			StartedAt: time.Now(), EndAt: time.Now().Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	e.mgr.SetNodeDirectory(nodeDir{"node-b": {other.URL, true}, "node-c": {"http://127.0.0.1:1", false}})
	send := func(method, path string, hdr map[string]string) *http.Response {
		req, _ := http.NewRequest(method, e.srv.URL+path, nil)
		req.Header.Set("X-API-Key", testKey)
		for k, v := range hdr {
			for _, one := range strings.Split(v, ",") { // one header line per hop
				req.Header.Add(k, one)
			}
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	tests := []struct {
		name, method, path string
		hdr                map[string]string
		want               int
		forwarded          bool
	}{
		{"control API", "GET", "/sandboxes/sbonb00000000000000b", nil, http.StatusTeapot, true},
		{"v2 connect", "POST", "/v2/sandboxes/sbonb00000000000000b/connect", nil, http.StatusTeapot, true},
		{"data plane by header", "GET", "/files?path=/x", map[string]string{"E2b-Sandbox-Id": "sbonb00000000000000b"}, http.StatusTeapot, true},
		{"forwarded once", "GET", "/sandboxes/sbonb00000000000000b", map[string]string{forwardedHeader: "node-x"}, http.StatusTeapot, true},
		{"forwarded twice", "GET", "/sandboxes/sbonb00000000000000b", map[string]string{forwardedHeader: "node-x,node-y"}, http.StatusNotFound, false},
		{"dead owner", "GET", "/sandboxes/sbondead0000000000dd", nil, http.StatusServiceUnavailable, false},
		{"unknown sandbox", "GET", "/sandboxes/nosuchsandbox0000000", nil, http.StatusNotFound, false},
		{"many sandboxes", "GET", "/sandboxes/metrics?sandbox_ids=sbonb00000000000000b", nil, http.StatusOK, false},
	}
	for _, tt := range tests {
		mu.Lock()
		before := len(seen)
		mu.Unlock()
		resp := send(tt.method, tt.path, tt.hdr)
		mu.Lock()
		got := len(seen) > before
		var fwd *http.Request
		if got {
			fwd = seen[len(seen)-1]
		}
		mu.Unlock()
		if resp.StatusCode != tt.want || got != tt.forwarded {
			t.Errorf("%s: status %d forwarded %v, want %d %v", tt.name, resp.StatusCode, got, tt.want, tt.forwarded)
			continue
		}
		var hops []string
		if fwd != nil {
			hops = fwd.Header.Values(forwardedHeader)
		}
		if fwd != nil && (len(hops) == 0 || hops[len(hops)-1] != "node-a" || fwd.Header.Get("X-API-Key") != testKey || fwd.URL.Path != pathOnly(tt.path)) {
			t.Errorf("%s: the owner got %s %s with %s=%q, key %q", tt.name, fwd.Method, fwd.URL, forwardedHeader, fwd.Header.Get(forwardedHeader), fwd.Header.Get("X-API-Key"))
		}
	}
}

func pathOnly(p string) string {
	for i, c := range p {
		if c == '?' {
			return p[:i]
		}
	}
	return p
}
