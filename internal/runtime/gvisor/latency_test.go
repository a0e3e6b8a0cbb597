package gvisor

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/forkbox/forkbox/internal/runtime"
	"github.com/forkbox/forkbox/internal/runtime/runtimetest"
)

// TestLatency measures the backend's lifecycle operations (medians of a few
// rounds, logged with -v) and fails only if an operation fails.
func TestLatency(t *testing.T) {
	setup(t)
	ctx := context.Background()
	r, err := newGvisor()
	if err != nil {
		t.Fatal(err)
	}
	const rounds = 5
	m := map[string][]time.Duration{}
	for i := 0; i < rounds; i++ {
		spec := testSpec(runtimetest.NewID(), false)
		start := time.Now()
		if _, err := r.Create(ctx, spec); err != nil {
			t.Fatalf("Create: %v", err)
		}
		m["Create call"] = append(m["Create call"], time.Since(start))
		t.Cleanup(func() { r.Delete(ctx, spec.ID) })
		waitAnswer(t, r, spec.ID)
		m["create → listening (python)"] = append(m["create → listening (python)"], time.Since(start))

		img := t.TempDir()
		stall := measureStall(t, r, spec.ID, func() {
			start = time.Now()
			if err := r.Checkpoint(ctx, spec.ID, img, runtime.CheckpointOptions{LeaveRunning: true}); err != nil {
				t.Fatalf("Checkpoint: %v", err)
			}
			m["checkpoint --leave-running call"] = append(m["checkpoint --leave-running call"], time.Since(start))
		})
		m["source stall during checkpoint"] = append(m["source stall during checkpoint"], stall)

		clone := testSpec(runtimetest.NewID(), false)
		start = time.Now()
		if _, err := r.Restore(ctx, clone, img); err != nil {
			t.Fatalf("Restore: %v", err)
		}
		m["Restore call"] = append(m["Restore call"], time.Since(start))
		waitAnswer(t, r, clone.ID)
		m["restore → answering"] = append(m["restore → answering"], time.Since(start))

		for _, id := range []string{spec.ID, clone.ID} {
			start = time.Now()
			if err := r.Delete(ctx, id); err != nil {
				t.Fatalf("Delete: %v", err)
			}
			m["Delete"] = append(m["Delete"], time.Since(start))
		}
	}
	for name, ds := range m {
		slices.Sort(ds)
		t.Logf("latency: %-34s median %v (min %v, max %v, n=%d)", name,
			ds[len(ds)/2].Round(time.Millisecond), ds[0].Round(time.Millisecond),
			ds[len(ds)-1].Round(time.Millisecond), len(ds))
	}
}

// waitAnswer polls the test server of id until it answers.
func waitAnswer(t *testing.T, r *Runtime, id string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := get(r, id, "/procs"); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never answered", id)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// measureStall runs op while requests hit id back to back and returns the
// slowest request: how long the sandbox stood still during op.
func measureStall(t *testing.T, r *Runtime, id string, op func()) time.Duration {
	t.Helper()
	var stop atomic.Bool
	var mu sync.Mutex
	var worst time.Duration
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !stop.Load() {
			start := time.Now()
			get(r, id, "/procs")
			d := time.Since(start)
			mu.Lock()
			worst = max(worst, d)
			mu.Unlock()
		}
	}()
	time.Sleep(30 * time.Millisecond)
	op()
	stop.Store(true)
	wg.Wait()
	return worst
}
