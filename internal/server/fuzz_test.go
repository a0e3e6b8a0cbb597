package server

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/forkbox/forkbox/internal/runtime/fake"
	"github.com/forkbox/forkbox/internal/sandbox"
	"github.com/forkbox/forkbox/internal/store"
)

// fuzzRoutes are the control-API calls whose bodies and queries
// FuzzRESTDecoders feeds: every route that decodes a request. The sandbox
// they name does not exist and the store has no template, so a decoded
// request ends in a 404 and nothing is ever created.
var fuzzRoutes = []struct{ method, path string }{
	{"POST", "/sandboxes"},
	{"POST", "/v2/sandboxes"},
	{"POST", "/sandboxes/nosuch/timeout"},
	{"POST", "/sandboxes/nosuch/refreshes"},
	{"POST", "/sandboxes/nosuch/connect"},
	{"POST", "/v2/sandboxes/nosuch/connect"},
	{"POST", "/sandboxes/nosuch/pause"},
	{"POST", "/sandboxes/nosuch/resume"},
	{"POST", "/sandboxes/nosuch/snapshots"},
	{"POST", "/sandboxes/nosuch/fork"},
	{"POST", "/sandboxes/nosuch/clone"},
	{"POST", "/sandboxes/nosuch/rollback"},
	{"GET", "/sandboxes"},
	{"GET", "/v2/sandboxes"},
	{"GET", "/snapshots"},
	{"GET", "/sandboxes/metrics"},
	{"GET", "/sandboxes/nosuch/metrics"},
	{"GET", "/sandboxes/nosuch/logs"},
	{"GET", "/v2/sandboxes/nosuch/logs"},
}

// fuzzServer is a Server over an empty store (one API key, no template).
func fuzzServer(f *testing.F) http.Handler {
	ctx := context.Background()
	st, err := store.OpenPath(ctx, ":memory:")
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { st.Close() })
	if err := st.AddAPIKey(ctx, "test", testKey, time.Now()); err != nil {
		f.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	rt := fake.New()
	mgr, err := sandbox.New(sandbox.Config{Runtime: rt, Store: st, Logger: log, ImageDir: f.TempDir()})
	if err != nil {
		f.Fatal(err)
	}
	s, err := New(Config{Manager: mgr, Keys: st, Logger: log})
	if err != nil {
		f.Fatal(err)
	}
	return s.Handler()
}

// FuzzRESTDecoders sends arbitrary bodies and query strings to every
// decoding route: the answer is never a server error (a panic is one, as
// net/http's recovery would be) and always a JSON error body when not 2xx.
func FuzzRESTDecoders(f *testing.F) {
	h := fuzzServer(f)
	seeds := []string{
		`{"templateID":"base","timeout":300,"metadata":{"a":"b"},"envVars":{"X":"1"}}`,
		`{"templateID":"base","autoPause":true,"autoResume":{"enabled":true},"secure":true,"allow_internet_access":false}`,
		`{"templateID":"base","autoResume":true,"network":{"allowPublicTraffic":false,"denyOut":["0.0.0.0/0"]},"cpuCount":2,"memoryMB":512}`,
		`{"timeout":-1}`, `{"timeout":99999999999999999999}`, `{"duration":60}`, `{"memory":false}`,
		`{"name":"snap:tag","ttl":3600}`, `{"count":3,"timeout":0}`, `{"count":101}`,
		`{"count":2,"strict":true,"concurrency":4}`, `{"snapshotID":"snap"}`,
		``, `null`, `[]`, `{"metadata":{"a":1}}`, `{"templateID":{}}`, "\x00", `{"autoResume":{"enabled":"yes"}}`,
	}
	queries := []string{"", "state=running,paused&limit=10", "limit=0", "limit=abc&nextToken=%zz",
		"metadata=a%3Db%26c%3Dd", "sandboxID=x&name=n:t", "start=0&end=99999999999", "sandbox_ids=a,b",
		"cursor=1&limit=1000&direction=forward&level=info&search=x"}
	for i := range fuzzRoutes {
		for _, b := range seeds {
			f.Add(uint8(i), []byte(b), queries[i%len(queries)])
		}
		for _, q := range queries {
			f.Add(uint8(i), []byte(nil), q)
		}
	}
	f.Fuzz(func(t *testing.T, route uint8, body []byte, query string) {
		rt := fuzzRoutes[int(route)%len(fuzzRoutes)]
		if strings.ContainsAny(query, "# \x00\r\n") {
			return // not a query string a client can send
		}
		req := httptest.NewRequest(rt.method, rt.path, bytes.NewReader(body))
		req.URL.RawQuery = query
		req.Header.Set("X-API-Key", testKey)
		req.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code >= 500 {
			t.Fatalf("%s %s?%s %q: %d %s", rt.method, rt.path, query, body, w.Code, w.Body.String())
		}
		if w.Code >= 300 && !strings.HasPrefix(strings.TrimSpace(w.Body.String()), "{") {
			t.Fatalf("%s %s?%s %q: %d without a JSON error body: %q", rt.method, rt.path, query, body, w.Code, w.Body.String())
		}
	})
}

// FuzzDataPlaneTarget parses arbitrary Host values and routing headers:
// never a panic; a target always names a sandbox and a port in range; a
// Host-routed target is exactly <port>-<id>.<domain> again when written
// back; and a request it does not route is left to the control API.
func FuzzDataPlaneTarget(f *testing.F) {
	for _, s := range [][3]string{
		{"49983-abc123.forkbox.test", "", ""}, {"8080-ABC.sbx.test:3000", "", ""}, {"127.0.0.1:3000", "", ""},
		{"localhost", "sbxid", "49983"}, {"", "sbxid", "0"}, {"", "sbxid", "65536"}, {"", " sbx ", "+80"},
		{"0080-abc.d", "", ""}, {"80-ab-c.d", "", ""}, {"80-.d", "", ""}, {"[::1]:80", "", ""}, {"-1-abc.d", "", ""},
		{"99999999999999999999-abc.d", "", ""}, {"80-abc.", "", ""}, {"80-\u00e9.d", "", ""},
	} {
		f.Add(s[0], s[1], s[2], false)
		f.Add(s[0], s[1], s[2], true)
	}
	f.Fuzz(func(t *testing.T, host, id, port string, novita bool) {
		r := httptest.NewRequest("GET", "/health", nil)
		r.Host = host
		idH, portH := SandboxIDHeader, SandboxPortHeader
		if novita {
			idH, portH = "Novita-Sandbox-Id", "Novita-Sandbox-Port"
		}
		r.Header[idH] = []string{id} // as received: not canonicalised or trimmed
		r.Header[portH] = []string{port}
		tg, ok, err := dataPlaneTarget(r)
		if !ok {
			if strings.TrimSpace(id) != "" {
				t.Fatalf("id header %q not routed", id)
			}
			return
		}
		if err != nil {
			return // a malformed port: a 400 for the client
		}
		if tg.id == "" || tg.port < 0 || tg.port > 65535 {
			t.Fatalf("host %q id %q port %q: target %+v", host, id, port, tg)
		}
		if strings.TrimSpace(id) != "" {
			return
		}
		again, ok := hostTarget(fmt.Sprintf("%d-%s.domain", tg.port, tg.id))
		if !ok || again != tg {
			t.Fatalf("host %q → %+v, written back → %+v %v", host, tg, again, ok)
		}
	})
}
