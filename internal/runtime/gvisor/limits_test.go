package gvisor

import (
	"context"
	"testing"
	"time"

	"github.com/forkbox/forkbox/internal/runtime"
	"github.com/forkbox/forkbox/internal/runtime/runtimetest"
)

// A sandbox that outgrows its memory limit dies as a whole (trap 7); the
// backend must report that as the sandbox stopping, not fail itself.
func TestMemoryLimitKillIsStop(t *testing.T) {
	setup(t)
	ctx := context.Background()
	r, err := newGvisor()
	if err != nil {
		t.Fatal(err)
	}
	spec := testSpec(runtimetest.NewID(), false)
	spec.Resources = runtime.Resources{MemoryMB: 64}
	// Touch every page of 1 GiB, far beyond 64 MiB plus headroom.
	spec.Args = []string{"python3", "-c",
		"import time\nb = bytearray(1 << 30)\nfor i in range(0, len(b), 4096): b[i] = 1\ntime.sleep(600)"}
	if _, err := r.Create(ctx, spec); err != nil {
		t.Fatalf("Create: %v", err)
	}
	t.Cleanup(func() { r.Delete(ctx, spec.ID) })
	deadline := time.Now().Add(60 * time.Second)
	for {
		info, err := r.Info(ctx, spec.ID)
		if err != nil {
			t.Fatalf("Info of an over-limit sandbox: %v", err)
		}
		if info.State == runtime.StateStopped {
			break
		}
		if time.Now().After(deadline) {
			st, _ := r.Stats(ctx, spec.ID)
			t.Fatalf("sandbox still %s after exceeding its limit (stats %+v)", info.State, st)
		}
		time.Sleep(50 * time.Millisecond)
	}
	list, err := r.List(ctx)
	if err != nil {
		t.Fatalf("List with a killed sandbox: %v", err)
	}
	for _, info := range list {
		if info.ID == spec.ID && info.State != runtime.StateStopped {
			t.Fatalf("List reports %s", info.State)
		}
	}
	if err := r.Delete(ctx, spec.ID); err != nil {
		t.Fatalf("Delete of a killed sandbox: %v", err)
	}
	checkClean(t, spec.ID)
}

// A new Runtime over the same state (a daemon restart) sees and reaches the
// sandboxes of the old one, and drops networks no sandbox accounts for.
func TestReattach(t *testing.T) {
	setup(t)
	ctx := context.Background()
	r, err := newGvisor()
	if err != nil {
		t.Fatal(err)
	}
	spec := testSpec(runtimetest.NewID(), false)
	startSandbox(t, r, spec)
	if got, err := get(r, spec.ID, "/count"); err != nil || got != "1" {
		t.Fatalf("/count = %q, %v", got, err)
	}
	orphan := runtimetest.NewID()
	if _, err := env.net.Allocate(ctx, orphan, false); err != nil {
		t.Fatal(err)
	}
	r2, err := newGvisor()
	if err != nil {
		t.Fatalf("New over existing state: %v", err)
	}
	info, err := r2.Info(ctx, spec.ID)
	if err != nil || info.State != runtime.StateRunning || info.Pid == 0 {
		t.Fatalf("Info after restart = %+v, %v", info, err)
	}
	if got, err := get(r2, spec.ID, "/count"); err != nil || got != "2" {
		t.Fatalf("/count after restart = %q, %v", got, err)
	}
	if _, ok := env.net.Get(orphan); ok {
		t.Fatalf("orphan network %s survived New", orphan)
	}
	checkClean(t, orphan)
}
