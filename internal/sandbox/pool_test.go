package sandbox

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/forkbox/forkbox/internal/images"
)

// A warm template with a pool: creates hand over pooled sandboxes (already
// restored), the pool refills, requests it cannot serve boot normally, and
// stopping the manager removes what is left in the pool.
func TestPoolHandsOverRestoredSandboxes(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	warmBase(t, e)
	e.m.cfg.PoolSize, e.m.cfg.PoolTemplates = 2, []string{"base"}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { e.m.Run(runCtx); close(done) }()
	waitPool := func(n int) {
		deadline := time.Now().Add(5 * time.Second)
		for e.m.pool.size("base") != n {
			if time.Now().After(deadline) {
				t.Fatalf("pool has %d, want %d", e.m.pool.size("base"), n)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitPool(2)
	var pooled []string
	for _, x := range e.m.pool.ready["base"] {
		pooled = append(pooled, x.id)
	}
	sb := e.create(t, CreateRequest{EnvVars: map[string]string{"A": "1"}})
	if !slices.Contains(pooled, sb.ID) {
		t.Errorf("create did not use the pool: %s not in %v", sb.ID, pooled)
	}
	if n := e.count(t, sb.ID); n != 1 {
		t.Errorf("pooled sandbox answers %d", n)
	}
	// Custom limits cannot come from the pool.
	custom := e.create(t, CreateRequest{MemoryMB: 333})
	if slices.Contains(pooled, custom.ID) {
		t.Error("a sandbox with custom limits came from the pool")
	}
	waitPool(2)
	stop()
	<-done
	ids := e.runtimeIDs(t)
	slices.Sort(ids)
	want := []string{sb.ID, custom.ID}
	slices.Sort(want)
	if !slices.Equal(ids, want) {
		t.Errorf("after stop the runtime holds %v, want only %v (pool drained)", ids, want)
	}
}

// warmBase gives the base template a warm image (what the pool restores
// from) and stores it.
func warmBase(t *testing.T, e *env) {
	t.Helper()
	ctx := context.Background()
	tpl, err := e.st.GetTemplate(ctx, "base")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.m.WarmTemplate(ctx, tpl, images.TemplateImage(strings.Repeat("a", 64))); err != nil {
		t.Fatal(err)
	}
	if err := e.st.PutTemplate(ctx, tpl); err != nil {
		t.Fatal(err)
	}
}
