package sandbox

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/forkbox/forkbox/internal/images"
	"github.com/forkbox/forkbox/internal/store"
)

// userTemplate stores a built template id with a warm image of its own
// (what a template build publishes) and returns it.
func userTemplate(t *testing.T, e *env, id string) *store.Template {
	t.Helper()
	ctx := context.Background()
	tpl := &store.Template{ID: id, Kind: store.KindTemplate, RootFS: t.TempDir(), CPUCount: 1, MemoryMB: 256}
	if err := e.m.WarmTemplate(ctx, tpl, images.TemplateImage(newToken())); err != nil {
		t.Fatal(err)
	}
	if err := e.st.PutTemplate(ctx, tpl); err != nil {
		t.Fatal(err)
	}
	return tpl
}

// pooledIDs lists template id's pooled sandboxes.
func pooledIDs(m *Manager, id string) []string {
	m.pool.mu.Lock()
	defer m.pool.mu.Unlock()
	var out []string
	for _, x := range m.pool.ready[id] {
		out = append(out, x.id)
	}
	return out
}

// waitPooled waits until template id's pool holds n sandboxes.
func waitPooled(t *testing.T, m *Manager, id string, n int) []string {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if ids := pooledIDs(m, id); len(ids) == n {
			return ids
		}
		if time.Now().After(deadline) {
			t.Fatalf("template %s: pool holds %v, want %d", id, pooledIDs(m, id), n)
		}
	}
}

// runManager runs e's Manager (evictor, pools) until the test ends.
func runManager(t *testing.T, e *env) {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { e.m.Run(ctx); close(done) }()
	t.Cleanup(func() { stop(); <-done })
}

// User templates get a pool while they are among the PoolRecent most
// recently built or used: a create from one is a hand-over; a rebuild's
// WarmPool removes the sandboxes of the old image before it returns (the
// build service collects that image's files next); a template used after
// it takes its place, the older one's pool going; a deleted template's
// pool is gone once ReconcilePools returns.
func TestUserTemplatePool(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.m.cfg.PoolSize, e.m.cfg.PoolRecent = 1, 1
	runManager(t, e)
	app := userTemplate(t, e, "app")
	e.m.WarmPool(ctx, "app")
	first := waitPooled(t, e.m, "app", 1)
	sb := e.create(t, CreateRequest{TemplateID: "app"})
	if sb.ID != first[0] {
		t.Errorf("create from app made %s, not its pooled %s", sb.ID, first[0])
	}
	old := waitPooled(t, e.m, "app", 1) // refilled at once, not at a sweep
	// A rebuild: same id, new image.
	rebuilt := userTemplate(t, e, "app")
	if imageOf(rebuilt) == imageOf(app) {
		t.Fatal("the rebuild has the old image")
	}
	e.m.WarmPool(ctx, "app")
	if slices.Contains(e.runtimeIDs(t), old[0]) {
		t.Errorf("pooled sandbox %s of the old image still runs after WarmPool", old[0])
	}
	fresh := waitPooled(t, e.m, "app", 1)
	if got := e.create(t, CreateRequest{TemplateID: "app"}); got.ID != fresh[0] {
		t.Errorf("create after the rebuild made %s, not the pooled %s", got.ID, fresh[0])
	}
	waitPooled(t, e.m, "app", 1)
	// Another template used: with PoolRecent 1 it takes app's place.
	userTemplate(t, e, "web")
	e.create(t, CreateRequest{TemplateID: "web"})
	if ids := pooledIDs(e.m, "app"); len(ids) != 0 {
		t.Errorf("app's pool %v stayed after web took its place", ids)
	}
	web := waitPooled(t, e.m, "web", 1)
	if err := e.st.DeleteTemplate(ctx, "web"); err != nil {
		t.Fatal(err)
	}
	e.m.ReconcilePools(ctx)
	if slices.Contains(e.runtimeIDs(t), web[0]) || len(pooledIDs(e.m, "web")) != 0 {
		t.Errorf("deleted template web: pooled sandbox %s left after ReconcilePools", web[0])
	}
	e.shutdown(t)
}

// User-template pools fill only while running and pooled sandboxes stay
// under MaxSandboxes, and never count against it: the quota's creates
// still succeed up to the limit.
func TestUserTemplatePoolWithinQuota(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.m.cfg.PoolSize, e.m.cfg.PoolRecent, e.m.cfg.MaxSandboxes = 2, 2, 2
	runManager(t, e)
	userTemplate(t, e, "app")
	e.m.WarmPool(ctx, "app")
	waitPooled(t, e.m, "app", 2)
	a := e.create(t, CreateRequest{TemplateID: "app"})
	// One running + one pooled = the limit: no refill.
	time.Sleep(100 * time.Millisecond)
	if n := len(pooledIDs(e.m, "app")); n != 1 {
		t.Errorf("pool holds %d with one running under a limit of 2, want 1", n)
	}
	b := e.create(t, CreateRequest{TemplateID: "app"})
	if _, err := e.m.Create(ctx, CreateRequest{TemplateID: "app"}); err == nil {
		t.Error("a third create under a limit of 2 succeeded")
	}
	time.Sleep(100 * time.Millisecond)
	if n := len(pooledIDs(e.m, "app")); n != 0 {
		t.Errorf("pool holds %d at the limit, want 0", n)
	}
	if ids := e.runtimeIDs(t); len(ids) != 2 || !slices.Contains(ids, a.ID) || !slices.Contains(ids, b.ID) {
		t.Errorf("runtime holds %v, want only %s and %s", ids, a.ID, b.ID)
	}
	e.shutdown(t)
}
