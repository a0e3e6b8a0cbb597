package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/forkbox/forkbox/internal/runtime"
	"github.com/forkbox/forkbox/internal/runtime/fake"
	"github.com/forkbox/forkbox/internal/sandbox"
	"github.com/forkbox/forkbox/internal/store"
	"github.com/forkbox/forkbox/internal/volumes"
)

const testKey = "e2b_0123456789abcdef"

// env is a running server over a Manager driving the fake runtime.
type env struct {
	t   *testing.T
	srv *httptest.Server
	s   *Server
	mgr *sandbox.Manager
	rt  *fake.Runtime

	// release unblocks the sandbox handler's /stream second chunk.
	release chan struct{}
	// initGate, when set, holds every /init until it is closed.
	initGate chan struct{}

	mu    sync.Mutex
	inits map[string]string // sandbox id → /init body
}

func newEnv(t *testing.T, mutate ...func(*Config)) *env {
	t.Helper()
	ctx := context.Background()
	st, err := store.OpenPath(ctx, ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.PutTemplate(ctx, &store.Template{
		ID: "base", Kind: store.KindTemplate, Aliases: []string{"base-alias"},
		CPUCount: 2, MemoryMB: 512, DiskSizeMB: 1024, RootFS: t.TempDir(),
	}); err != nil {
		t.Fatal(err)
	}
	if err := st.AddAPIKey(ctx, "test", testKey, time.Now()); err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, release: make(chan struct{}), inits: map[string]string{}}
	e.rt = fake.New()
	e.rt.PortHandler = e.sandboxHandler
	t.Cleanup(e.deleteAll)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	vols, err := volumes.New(t.TempDir(), log)
	if err != nil {
		t.Fatal(err)
	}
	// Before the TempDir goes: a mounted volume would keep it.
	t.Cleanup(func() { removeVolumes(st, vols) })
	e.mgr, err = sandbox.New(sandbox.Config{
		Runtime: e.rt, Store: st, Logger: log, AgentWait: 5 * time.Second, ImageDir: t.TempDir(),
		Volumes: vols, VolumeSizeMB: 8,
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Manager: e.mgr, Keys: st, Logger: log}
	for _, m := range mutate {
		m(&cfg)
	}
	if e.s, err = New(cfg); err != nil {
		t.Fatal(err)
	}
	e.srv = httptest.NewServer(e.s.Handler())
	t.Cleanup(e.srv.Close)
	return e
}

// deleteAll removes every fake sandbox, ending their servers.
func (e *env) deleteAll() {
	infos, _ := e.rt.List(context.Background())
	for _, in := range infos {
		e.rt.Delete(context.Background(), in.ID)
	}
}

// failNthRestore makes the k-th Restore (or Replace) from now fail.
func (e *env) failNthRestore(k int64) {
	var n atomic.Int64
	e.rt.FailRestore = func(runtime.Spec, string) error {
		if n.Add(1) == k {
			return errors.New("injected restore failure")
		}
		return nil
	}
}

// sandboxHandler is what listens inside every fake sandbox: envd-like
// routes on 49983 and an echo server on 49999 and 8080.
func (e *env) sandboxHandler(id string, port int) http.Handler {
	switch port {
	case 49983:
	case 49999, 8080:
		return http.HandlerFunc(echo)
	case 8081:
		return downloads()
	default:
		return nil
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /init", func(w http.ResponseWriter, r *http.Request) {
		if e.initGate != nil {
			<-e.initGate
		}
		body, _ := io.ReadAll(r.Body)
		e.mu.Lock()
		e.inits[id] = string(body)
		e.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	mux.HandleFunc("/stream", e.stream)
	mux.HandleFunc("/ws", upgradeEcho)
	mux.HandleFunc("/", echo)
	return mux
}

// echoed is what echo answers.
type echoed struct {
	Method string      `json:"method"`
	Path   string      `json:"path"`
	Query  string      `json:"query"`
	Host   string      `json:"host"`
	Header http.Header `json:"header"`
	Body   string      `json:"body"`
}

func echo(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(echoed{
		Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Host: r.Host,
		Header: r.Header, Body: string(body),
	})
}

// stream writes one chunk, flushes, and writes the second only once the
// test has seen the first and released it.
func (e *env) stream(w http.ResponseWriter, r *http.Request) {
	io.WriteString(w, "first\n")
	w.(http.Flusher).Flush()
	select {
	case <-e.release:
	case <-time.After(5 * time.Second):
		io.WriteString(w, "timeout\n")
		return
	}
	io.WriteString(w, "second\n")
}

// upgradeEcho switches protocols and echoes lines back, upper-cased.
func upgradeEcho(w http.ResponseWriter, r *http.Request) {
	if !strings.EqualFold(r.Header.Get("Upgrade"), "echo") {
		http.Error(w, "want Upgrade: echo", http.StatusBadRequest)
		return
	}
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return
	}
	defer conn.Close()
	brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n")
	brw.Flush()
	for {
		line, err := brw.ReadString('\n')
		if err != nil {
			return
		}
		brw.WriteString(strings.ToUpper(line))
		brw.Flush()
	}
}

// call sends an API request with the test key and decodes nothing.
func (e *env) call(method, path string, body any, hdr ...string) (*http.Response, []byte) {
	e.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			e.t.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, e.srv.URL+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("X-API-Key", testKey)
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i] == "Host" {
			req.Host = hdr[i+1]
			continue
		}
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp, data
}

// create makes a sandbox through the API and returns the answer.
func (e *env) create(body map[string]any) map[string]any {
	e.t.Helper()
	if body == nil {
		body = map[string]any{"templateID": "base"}
	}
	resp, data := e.call("POST", "/sandboxes", body)
	if resp.StatusCode != http.StatusCreated {
		e.t.Fatalf("create: %d %s", resp.StatusCode, data)
	}
	return decodeObject(e.t, data)
}

func decodeObject(t *testing.T, data []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("decode %q: %v", data, err)
	}
	return m
}

func decodeArray(t *testing.T, data []byte) []map[string]any {
	t.Helper()
	var a []map[string]any
	if err := json.Unmarshal(data, &a); err != nil {
		t.Fatalf("decode %q: %v", data, err)
	}
	return a
}

// wantError checks an {code, message} answer.
func wantError(t *testing.T, resp *http.Response, data []byte, status int) {
	t.Helper()
	if resp.StatusCode != status {
		t.Fatalf("status %d, want %d: %s", resp.StatusCode, status, data)
	}
	m := decodeObject(t, data)
	if code, _ := m["code"].(float64); int(code) != status {
		t.Errorf("code %v, want %d: %s", m["code"], status, data)
	}
	if msg, _ := m["message"].(string); msg == "" {
		t.Errorf("no message: %s", data)
	}
}

// wantKeys checks that every key is present in m.
func wantKeys(t *testing.T, m map[string]any, keys ...string) {
	t.Helper()
	for _, k := range keys {
		if _, ok := m[k]; !ok {
			t.Errorf("missing %q in %v", k, m)
		}
	}
}

// readLine reads one line from r or fails after a timeout.
func readLine(t *testing.T, r *bufio.Reader) string {
	t.Helper()
	type res struct {
		s   string
		err error
	}
	ch := make(chan res, 1)
	go func() {
		s, err := r.ReadString('\n')
		ch <- res{s, err}
	}()
	select {
	case got := <-ch:
		if got.err != nil {
			t.Fatalf("read: %v (got %q)", got.err, got.s)
		}
		return got.s
	case <-time.After(3 * time.Second):
		t.Fatal("timed out reading a line: the response is buffered")
		return ""
	}
}

// removeVolumes unmounts and removes every volume a test left.
func removeVolumes(st *store.Store, vols *volumes.Host) {
	ctx := context.Background()
	vs, _ := st.ListVolumes(ctx)
	for _, v := range vs {
		vols.Remove(ctx, v.ID)
	}
}
