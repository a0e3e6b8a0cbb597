package web

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"
)

func get(t *testing.T, h http.Handler, path string) *http.Response {
	t.Helper()
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	req.URL.Path = path // "" too: what StripPrefix(Path) leaves of Path itself
	h.ServeHTTP(rec, req)
	return rec.Result()
}

func body(t *testing.T, resp *http.Response) string {
	t.Helper()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestHandlerServesFiles(t *testing.T) {
	h := Handler()
	for _, tc := range []struct {
		path, ctype, contains string
	}{
		{"/", "text/html; charset=utf-8", `<script src="app.js"`},
		{"", "text/html; charset=utf-8", "<title>forkbox dashboard</title>"},
		{"/index.html", "text/html; charset=utf-8", `href="style.css"`},
		{"/app.js", "text/javascript; charset=utf-8", "/lineage"},
		{"/style.css", "text/css; charset=utf-8", ".badge"},
		{"/favicon.svg", "image/svg+xml", "<svg"},
		{"/templates.js", "text/javascript; charset=utf-8", "/builds/"},
		{"/", "text/html; charset=utf-8", `<script src="templates.js"`},
		{"/secrets.js", "text/javascript; charset=utf-8", "/secrets?limit="},
		{"/", "text/html; charset=utf-8", `<script src="secrets.js"`},
		{"/volumes.js", "text/javascript; charset=utf-8", "/volumes"},
		{"/", "text/html; charset=utf-8", `<script src="volumes.js"`},
		{"/nodes.js", "text/javascript; charset=utf-8", "/undrain"},
		{"/nodes.js", "text/javascript; charset=utf-8", `act(button, "DELETE", "/nodes/"`},
		{"/", "text/html; charset=utf-8", `<script src="nodes.js"`},
	} {
		resp := get(t, h, tc.path)
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %q: status %d, want 200", tc.path, resp.StatusCode)
			continue
		}
		if got := resp.Header.Get("Content-Type"); got != tc.ctype {
			t.Errorf("GET %q: Content-Type %q, want %q", tc.path, got, tc.ctype)
		}
		if b := body(t, resp); !strings.Contains(b, tc.contains) {
			t.Errorf("GET %q: body lacks %q", tc.path, tc.contains)
		}
	}
}

func TestHandlerNotFound(t *testing.T) {
	h := Handler()
	for _, p := range []string{"/nosuch.js", "/static/app.js", "/../web.go", "/web.go", "/index.html/x", "/sub/"} {
		if resp := get(t, h, p); resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %q: status %d, want 404", p, resp.StatusCode)
		}
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/", nil))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST /: status %d, want 405", rec.Code)
	}
}

// TestMountedUnderPath checks the handler as the daemon mounts it.
func TestMountedUnderPath(t *testing.T) {
	mux := http.NewServeMux()
	mux.Handle(Path, http.StripPrefix(strings.TrimSuffix(Path, "/"), Handler()))
	for path, want := range map[string]int{
		Path:                 http.StatusOK,
		Path + "app.js":      http.StatusOK,
		Path + "style.css":   http.StatusOK,
		Path + "missing.txt": http.StatusNotFound,
	} {
		if resp := get(t, mux, path); resp.StatusCode != want {
			t.Errorf("GET %s: status %d, want %d", path, resp.StatusCode, want)
		}
	}
	// The brief's form, stripping the whole prefix, works too.
	h := http.StripPrefix(Path, Handler())
	if resp := get(t, h, Path); resp.StatusCode != http.StatusOK || !strings.Contains(body(t, resp), "<html") {
		t.Errorf("StripPrefix(%q): GET %s: status %d", Path, Path, resp.StatusCode)
	}
}

func TestHandlerCaching(t *testing.T) {
	h := Handler()
	resp := get(t, h, "/app.js")
	etag := resp.Header.Get("ETag")
	if etag == "" {
		t.Fatal("no ETag")
	}
	req := httptest.NewRequest(http.MethodGet, "/app.js", nil)
	req.Header.Set("If-None-Match", etag)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusNotModified {
		t.Errorf("conditional GET: status %d, want 304", rec.Code)
	}
	if csp := get(t, h, "/").Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") {
		t.Errorf("index.html CSP = %q", csp)
	}
}

// TestScriptParses runs node --check on the embedded app.js.
func TestScriptParses(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node is required to check app.js: %v", err)
	}
	for _, f := range []string{"static/app.js", "static/templates.js", "static/volumes.js", "static/secrets.js", "static/nodes.js", "static/diff.js"} {
		if out, err := exec.Command(node, "--check", f).CombinedOutput(); err != nil {
			t.Fatalf("node --check %s: %v\n%s", f, err, out)
		}
	}
}
