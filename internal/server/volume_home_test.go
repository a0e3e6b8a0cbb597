package server

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/forkbox/forkbox/internal/store"
)

// TestForwardVolumes: in a cluster a volume's requests are answered by
// the node keeping its storage — its deletion, its content API and the
// creates mounting it (named, or a snapshot's), body intact — and a
// volume of a dead node is 503; this node's volumes, unknown ones and
// requests forwarded twice are answered here.
func TestForwardVolumes(t *testing.T) {
	var mu sync.Mutex
	var bodies []string
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, r.Method+" "+r.URL.Path+" "+string(b))
		mu.Unlock()
		w.WriteHeader(http.StatusTeapot)
	}))
	defer other.Close()
	var st *store.Store
	e := newEnv(t, func(c *Config) { st = c.Keys.(*store.Store); c.NodeID = "node-a" })
	ctx := context.Background()
	for name, node := range map[string]string{"volb": "node-b", "volc": "node-c"} {
		if err := st.PutVolume(ctx, &store.Volume{ID: name + "000000000000000x", Name: name, Token: "t", SizeMB: 8, Node: node, CreatedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.PutTemplate(ctx, &store.Template{ID: "snapb", Kind: store.KindSnapshot, CPUCount: 2, MemoryMB: 512, DiskSizeMB: 1024,
		Volumes: []store.VolumeMount{{VolumeID: "volb000000000000000x", Name: "volb", Path: "/mnt"}}}); err != nil {
		t.Fatal(err)
	}
	e.mgr.SetNodeDirectory(nodeDir{"node-b": {other.URL, true}, "node-c": {"http://127.0.0.1:1", false}})
	createB := `{"templateID":"base","volumeMounts":[{"name":"volb","path":"/mnt"}]}`
	tests := []struct {
		name, method, path, body string
		hops                     int
		want                     int
		forwarded                string
	}{
		{"delete", "DELETE", "/volumes/volb000000000000000x", "", 0, http.StatusTeapot, "DELETE /volumes/volb000000000000000x "},
		{"delete by a dead node's", "DELETE", "/volumes/volc", "", 0, http.StatusServiceUnavailable, ""},
		{"delete unknown", "DELETE", "/volumes/nosuchvolume", "", 0, http.StatusNotFound, ""},
		{"content", "GET", "/volumecontent/volb000000000000000x/dir?path=/", "", 0, http.StatusTeapot, "GET /volumecontent/volb000000000000000x/dir "},
		{"create mounting", "POST", "/sandboxes", createB, 0, http.StatusTeapot, "POST /sandboxes " + createB},
		{"create from a snapshot mounting", "POST", "/sandboxes", `{"templateID":"snapb"}`, 1, http.StatusTeapot, `POST /sandboxes {"templateID":"snapb"}`},
		{"forwarded twice", "DELETE", "/volumes/volb000000000000000x", "", 2, http.StatusNoContent, ""},
	}
	for _, tt := range tests {
		mu.Lock()
		before := len(bodies)
		mu.Unlock()
		req, _ := http.NewRequest(tt.method, e.srv.URL+tt.path, strings.NewReader(tt.body))
		req.Header.Set("X-API-Key", testKey)
		for range tt.hops {
			req.Header.Add(forwardedHeader, "node-x")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		msg, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		mu.Lock()
		var got string
		if len(bodies) > before {
			got = bodies[len(bodies)-1]
		}
		mu.Unlock()
		if resp.StatusCode != tt.want || got != tt.forwarded {
			t.Errorf("%s: %d %s, forwarded %q; want %d, forwarded %q", tt.name, resp.StatusCode, bytes.TrimSpace(msg), got, tt.want, tt.forwarded)
		}
	}
}
