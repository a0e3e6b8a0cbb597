package gvisor

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/forkbox/forkbox/internal/runtime"
	"github.com/forkbox/forkbox/internal/runtime/runtimetest"
)

// killSentry kills sandbox id's sentry with SIGKILL, as an operator (or
// the host's OOM killer) would.
func killSentry(t *testing.T, id string) {
	t.Helper()
	r, err := newGvisor()
	if err != nil {
		t.Fatal(err)
	}
	info, err := r.Info(context.Background(), id)
	if err != nil || info.Pid <= 0 {
		t.Fatalf("Info %s = %+v, %v; want a pid", id, info, err)
	}
	if err := syscall.Kill(info.Pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill sentry %d: %v", info.Pid, err)
	}
}

// A sandbox that outgrows the host's memory limit is reported by Wait as
// out of memory, read from the cgroup's OOM kill counter.
func TestWaitOutOfMemory(t *testing.T) {
	setup(t)
	ctx := context.Background()
	r, err := newGvisor()
	if err != nil {
		t.Fatal(err)
	}
	spec := testSpec(runtimetest.NewID(), false)
	spec.Resources = runtime.Resources{MemoryMB: 64}
	// Touch 1 GiB after a second (so Wait is waiting), far beyond the limit.
	spec.Args = []string{"python3", "-c",
		"import time\ntime.sleep(1)\nb = bytearray(1 << 30)\nfor i in range(0, len(b), 4096): b[i] = 1\ntime.sleep(600)"}
	if _, err := r.Create(ctx, spec); err != nil {
		t.Fatalf("Create: %v", err)
	}
	t.Cleanup(func() { r.Delete(ctx, spec.ID) })
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	ex, err := r.Wait(wctx, spec.ID)
	if err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if ex.Reason != runtime.ExitOutOfMemory {
		t.Fatalf("Wait = %+v, want reason %q", ex, runtime.ExitOutOfMemory)
	}
	t.Logf("exit: %+v", ex)
	if err := r.Delete(ctx, spec.ID); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	checkClean(t, spec.ID)
}
