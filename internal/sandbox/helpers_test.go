package sandbox

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/images"
	"github.com/forkbox/forkbox/internal/runtime/fake"
	"github.com/forkbox/forkbox/internal/store"
)

// memAgent stands in for the in-sandbox agent: it answers /init and keeps
// a counter in "memory" (GET /count increments and returns it), which a
// checkpoint carries over through Clone like a real memory image.
type memAgent struct {
	mu    sync.Mutex
	count int
	inits *atomic.Int32
	fail  bool // answer /init with 500
}

func (a *memAgent) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/health":
		w.WriteHeader(http.StatusNoContent)
	case "/init":
		a.inits.Add(1)
		a.mu.Lock()
		fail := a.fail
		a.mu.Unlock()
		if fail {
			http.Error(w, "broken", http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	case "/count":
		a.mu.Lock()
		a.count++
		n := a.count
		a.mu.Unlock()
		fmt.Fprint(w, n)
	default:
		http.NotFound(w, r)
	}
}

// setFail makes /init fail (or answer again); checkpoints taken meanwhile
// carry the setting.
func (a *memAgent) setFail(fail bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.fail = fail
}

// Clone implements fake.Cloner: restores continue from the saved count.
func (a *memAgent) Clone() http.Handler {
	a.mu.Lock()
	defer a.mu.Unlock()
	return &memAgent{count: a.count, inits: a.inits, fail: a.fail}
}

type env struct {
	m     *Manager
	rt    *fake.Runtime
	st    *store.Store
	inits atomic.Int32
}

// newEnv builds a Manager over the fake runtime and an in-memory store with
// a base template.
func newEnv(t *testing.T) *env {
	t.Helper()
	ctx := context.Background()
	st, err := store.OpenPath(ctx, ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.PutTemplate(ctx, &store.Template{ID: "base", Kind: store.KindTemplate, RootFS: t.TempDir(), CPUCount: 1, MemoryMB: 256, Aliases: []string{"code-interpreter-v1"}}); err != nil {
		t.Fatal(err)
	}
	e := &env{rt: fake.New(), st: st}
	e.rt.Handler = func(id string) http.Handler { return &memAgent{inits: &e.inits} }
	e.m = e.newManager(t)
	return e
}

func (e *env) newManager(t *testing.T) *Manager {
	m, err := New(Config{
		Runtime: e.rt, Store: e.st, ImageDir: t.TempDir(),
		Logger:    slog.New(slog.NewTextHandler(testLogOut, nil)),
		AgentWait: 2 * time.Second, AgentArgs: []string{"/agent"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func (e *env) create(t *testing.T, req CreateRequest) *Sandbox {
	t.Helper()
	if req.TemplateID == "" {
		req.TemplateID = "base"
	}
	sb, err := e.m.Create(context.Background(), req)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	return sb
}

// count asks sandbox id's agent for its next counter value.
func (e *env) count(t *testing.T, id string) int {
	t.Helper()
	return e.countVia(t, e.m.agentHTTP, id)
}

// countVia is count through a given client (the data plane's Transport).
func (e *env) countVia(t *testing.T, c *http.Client, id string) int {
	t.Helper()
	resp, err := c.Get(e.m.agentURL(id, "/count"))
	if err != nil {
		t.Fatalf("count %s: %v", id, err)
	}
	defer resp.Body.Close()
	var n int
	fmt.Fscan(resp.Body, &n)
	return n
}

// waitState polls until id is in state want (pause is asynchronous).
func (e *env) waitState(t *testing.T, id string, want State) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		sb, err := e.m.Get(context.Background(), id)
		if err == nil && sb.State == want {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	sb, err := e.m.Get(context.Background(), id)
	t.Fatalf("sandbox %s never reached %s (now %v, %v)", id, want, sb, err)
}

func (e *env) runtimeIDs(t *testing.T) []string {
	infos, err := e.rt.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, in := range infos {
		ids = append(ids, in.ID)
	}
	return ids
}

// shutdown kills every sandbox and drops idle agent connections, so a
// synctest bubble ends with no goroutines left blocked.
func (e *env) shutdown(t *testing.T) {
	t.Helper()
	e.m.mu.Lock()
	var ids []string
	for id := range e.m.boxes {
		ids = append(ids, id)
	}
	e.m.mu.Unlock()
	for _, id := range ids {
		// Every operation ends its claim (op.done or op.fail): one that did
		// not would leave the sandbox transient for good.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := e.m.WaitIdle(ctx, id)
		cancel()
		if err != nil && !errdefs.IsNotFound(err) {
			t.Fatalf("sandbox %s: an operation never ended its claim: %v", id, err)
		}
		if err := e.m.Kill(context.Background(), id); err != nil && !errdefs.IsNotFound(err) {
			t.Errorf("shutdown kill %s: %v", id, err)
		}
	}
	e.m.agentHTTP.CloseIdleConnections()
}

// testLogOut receives the manager's logs (io.Discard; swap for os.Stderr
// when debugging a test).
var testLogOut io.Writer = io.Discard

// imageDir is the pause image sandbox id's record points to.
func (e *env) imageDir(id string) string {
	e.m.mu.Lock()
	defer e.m.mu.Unlock()
	if en, ok := e.m.boxes[id]; ok {
		return en.rec.ImageDir
	}
	return ""
}

// hasImage reports whether the manager's image store holds ref.
func (e *env) hasImage(ref images.Ref) bool {
	return images.Exists(context.Background(), e.m.img, ref)
}
