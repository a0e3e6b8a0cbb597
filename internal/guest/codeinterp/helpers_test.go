package codeinterp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// hostPackages are the Debian packages the rich-output tests need.
const hostPackages = "python3-ipykernel python3-matplotlib python3-pandas python3-numpy"

// testPython returns the interpreter the tests use: Debian's, since the
// template's libraries come from Debian packages.
func testPython(t testing.TB) string {
	t.Helper()
	if _, err := os.Stat("/usr/bin/python3"); err == nil {
		return "/usr/bin/python3"
	}
	p, err := exec.LookPath("python3")
	if err != nil {
		t.Fatalf("python3 is required for these tests: %v", err)
	}
	return p
}

// requireLibs fails the test when matplotlib/pandas are not installed.
func requireLibs(t *testing.T) {
	t.Helper()
	py := testPython(t)
	out, err := exec.Command(py, "-c", "import ipykernel, matplotlib, pandas, numpy").CombinedOutput()
	if err != nil {
		t.Fatalf("%s lacks ipykernel/matplotlib/pandas/numpy (install with: apt-get install -y --no-install-recommends %s): %v\n%s",
			py, hostPackages, err, out)
	}
}

type testServer struct {
	t     testing.TB
	srv   *Server
	url   string
	token string // sent as X-Access-Token when set
}

func newTestServer(t testing.TB, mod ...func(*Config)) *testServer {
	t.Helper()
	cfg := Config{
		Python:         testPython(t),
		Logger:         slog.New(slog.NewTextHandler(io.Discard, nil)),
		InterruptGrace: 20 * time.Second,
	}
	for _, m := range mod {
		m(&cfg)
	}
	s := New(cfg)
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(func() {
		ts.Close()
		s.Close()
	})
	return &testServer{t: t, srv: s, url: ts.URL}
}

// event is one line of an /execute stream and when it arrived.
type event struct {
	m  map[string]any
	at time.Time
}

func (e event) typ() string      { return str(e.m["type"]) }
func (e event) get(k string) any { return e.m[k] }

func str(v any) string {
	s, _ := v.(string)
	return s
}

// execResult is a finished /execute stream.
type execResult struct {
	events []event
}

func (r execResult) of(typ string) []event {
	var out []event
	for _, e := range r.events {
		if e.typ() == typ {
			out = append(out, e)
		}
	}
	return out
}

func (r execResult) text(typ string) string {
	var b strings.Builder
	for _, e := range r.of(typ) {
		b.WriteString(str(e.get("text")))
	}
	return b.String()
}

// main returns the main result, or nil.
func (r execResult) main() map[string]any {
	for _, e := range r.of("result") {
		if e.get("is_main_result") == true {
			return e.m
		}
	}
	return nil
}

func (r execResult) err() map[string]any {
	if errs := r.of("error"); len(errs) > 0 {
		return errs[0].m
	}
	return nil
}

// exec runs code and reads the whole stream, failing on a malformed one.
func (ts *testServer) exec(body map[string]any) execResult {
	ts.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var res execResult
	ts.stream(ctx, body, func(e event) bool {
		res.events = append(res.events, e)
		return true
	})
	if n := len(res.events); n == 0 || res.events[n-1].typ() != "end_of_execution" {
		ts.t.Fatalf("stream did not end with end_of_execution: %v", res.events)
	}
	return res
}

// run executes code in the default context (or the given context id).
func (ts *testServer) run(code string, contextID ...string) execResult {
	ts.t.Helper()
	body := map[string]any{"code": code}
	if len(contextID) > 0 {
		body["context_id"] = contextID[0]
	}
	return ts.exec(body)
}

// stream posts /execute and calls fn for each event until fn returns false.
func (ts *testServer) stream(ctx context.Context, body map[string]any, fn func(event) bool) {
	ts.t.Helper()
	resp := ts.do(ctx, http.MethodPost, "/execute", body)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		ts.t.Fatalf("POST /execute: %s: %s", resp.Status, b)
	}
	br := bufio.NewReader(resp.Body)
	for {
		line, err := br.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			var m map[string]any
			if jerr := json.Unmarshal(line, &m); jerr != nil {
				ts.t.Fatalf("bad event line %q: %v", line, jerr)
			}
			if !fn(event{m: m, at: time.Now()}) {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (ts *testServer) do(ctx context.Context, method, path string, body any) *http.Response {
	ts.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			ts.t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, ts.url+path, rd)
	if err != nil {
		ts.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if ts.token != "" {
		req.Header.Set("X-Access-Token", ts.token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		ts.t.Fatalf("%s %s: %v", method, path, err)
	}
	return resp
}

// call does a JSON request and decodes the answer into out (if non-nil),
// returning the status code.
func (ts *testServer) call(method, path string, body, out any) int {
	ts.t.Helper()
	resp := ts.do(context.Background(), method, path, body)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(b, out); err != nil {
			ts.t.Fatalf("%s %s: decode %q: %v", method, path, b, err)
		}
	}
	return resp.StatusCode
}

// newContext creates a context and returns its id.
func (ts *testServer) newContext(lang, cwd string) string {
	ts.t.Helper()
	var c struct{ ID, Language, Cwd string }
	if code := ts.call(http.MethodPost, "/contexts", map[string]string{"language": lang, "cwd": cwd}, &c); code != http.StatusOK {
		ts.t.Fatalf("POST /contexts: status %d", code)
	}
	if c.ID == "" {
		ts.t.Fatal("POST /contexts returned no id")
	}
	return c.ID
}

// mustMain returns the main result's text, failing if there is none or the
// cell raised.
func mustMain(t *testing.T, r execResult) string {
	t.Helper()
	if e := r.err(); e != nil {
		t.Fatalf("unexpected error: %v", e)
	}
	m := r.main()
	if m == nil {
		t.Fatalf("no main result in %v", r.events)
	}
	return str(m["text"])
}
