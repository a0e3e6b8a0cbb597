package gvisor

import (
	"context"
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/forkbox/forkbox/internal/errdefs"
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

// waitExit waits for sandbox id's exit while act runs and returns it.
func waitExit(t *testing.T, r *Runtime, id string, act func()) runtime.Exit {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	type result struct {
		ex  runtime.Exit
		err error
	}
	done := make(chan result, 1)
	go func() { ex, err := r.Wait(ctx, id); done <- result{ex, err} }()
	time.Sleep(200 * time.Millisecond) // Wait is waiting
	act()
	res := <-done
	if res.err != nil {
		t.Fatalf("Wait: %v", res.err)
	}
	t.Logf("exit: %+v", res.ex)
	return res.ex
}

// A sandbox whose tasks outgrow the host's pids limit dies as a whole
// (trap 7) and Wait says so, from the pids cgroup's counter. Only a task
// holding CAP_SYS_RESOURCE gets past RLIMIT_NPROC inside to provoke it: here
// the first process, which (unlike the agent) keeps it.
func TestWaitProcessLimit(t *testing.T) {
	r := newRuntime(t).(*Runtime)
	spec := testSpec(runtimetest.NewID(), false)
	spec.Resources = runtime.Resources{PidsMax: 50, MemoryMB: 512}
	spec.Args = []string{"python3", "-c", `
import os, time
time.sleep(1)
while True:
    if os.fork() == 0:
        os.execv("/bin/sleep", ["sleep", "600"])
`}
	if _, err := r.Create(context.Background(), spec); err != nil {
		t.Fatalf("Create: %v", err)
	}
	t.Cleanup(func() { r.Delete(context.Background(), spec.ID) })
	ex := waitExit(t, r, spec.ID, func() {})
	if ex.Reason != runtime.ExitProcessLimit || !strings.Contains(ex.Detail, "task limit") {
		t.Fatalf("Wait = %+v, want reason %q", ex, runtime.ExitProcessLimit)
	}
}

// A sentry that crashes — here made to panic by its panic signal — writes
// a Go crash report to its panic log; Wait reports it crashed with the
// report's first line, where a SIGKILL (no report) is "killed".
func TestWaitCrashed(t *testing.T) {
	setup(t)
	r, err := New(context.Background(), Config{RunscPath: env.runsc, StateDir: env.state, Net: env.net,
		CgroupParent: testCgroupParent, PanicSignal: syscall.SIGUSR2})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		sig    syscall.Signal
		reason runtime.ExitReason
		detail string
	}{
		{syscall.SIGUSR2, runtime.ExitCrashed, "crashed: panic: Signal-induced panic"},
		{syscall.SIGKILL, runtime.ExitKilled, "killed"},
	} {
		spec := testSpec(runtimetest.NewID(), false)
		startSandbox(t, r, spec)
		info, err := r.Info(context.Background(), spec.ID)
		if err != nil || info.Pid <= 0 {
			t.Fatalf("Info = %+v, %v", info, err)
		}
		ex := waitExit(t, r, spec.ID, func() { syscall.Kill(info.Pid, tc.sig) })
		if ex.Reason != tc.reason || !strings.Contains(ex.Detail, tc.detail) {
			t.Errorf("%v: Wait = %+v, want %q (%q)", tc.sig, ex, tc.reason, tc.detail)
		}
		if err := r.Delete(context.Background(), spec.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(r.panicLog(spec.ID)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%v: the crash report outlives the sandbox: %v", tc.sig, err)
		}
	}
}

// A sandbox that died before anyone waited on it (here: out of memory at
// once) is still reported with its reason by Stopped; a running one is a
// conflict.
func TestStoppedBeforeWait(t *testing.T) {
	r := newRuntime(t).(*Runtime)
	ctx := context.Background()
	spec := testSpec(runtimetest.NewID(), false)
	spec.Resources = runtime.Resources{MemoryMB: 64}
	spec.Args = []string{"python3", "-c",
		"import time\ntime.sleep(2)\nb = bytearray(1 << 30)\nfor i in range(0, len(b), 4096): b[i] = 1\ntime.sleep(600)"}
	if _, err := r.Create(ctx, spec); err != nil {
		t.Fatalf("Create: %v", err)
	}
	t.Cleanup(func() { r.Delete(ctx, spec.ID) })
	if _, err := r.Stopped(ctx, spec.ID); !errdefs.IsConflict(err) {
		t.Fatalf("Stopped of a running sandbox: %v, want a conflict", err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		info, err := r.Info(ctx, spec.ID)
		if err == nil && info.State == runtime.StateStopped {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not stopped a minute after the hog started: %+v, %v", info, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	ex, err := r.Stopped(ctx, spec.ID)
	if err != nil || ex.Reason != runtime.ExitOutOfMemory {
		t.Fatalf("Stopped = %+v, %v; want reason %q", ex, err, runtime.ExitOutOfMemory)
	}
	t.Logf("exit: %+v", ex)
	if _, err := r.Wait(ctx, spec.ID); !errdefs.IsConflict(err) {
		t.Errorf("Wait of the stopped sandbox: %v, want a conflict", err)
	}
}

// TestSupervisorFromPidFile checks that a create, a restore and a restore
// into a standby container each leave their sandbox process's pid for Wait
// (from runsc's --pid-file), the one `runsc state` reports, so that the
// first Wait starts no runsc.
func TestSupervisorFromPidFile(t *testing.T) {
	setup(t)
	ctx := context.Background()
	r := newStandbyRuntime(t, 1)
	spec := testSpec(runtimetest.NewID(), false)
	if _, err := r.Create(ctx, spec); err != nil {
		t.Fatalf("Create: %v", err)
	}
	t.Cleanup(func() { r.Delete(ctx, spec.ID) })
	waitAnswer(t, r, spec.ID)
	checkSupervisorNoted(t, r, spec.ID)
	img := t.TempDir()
	if err := r.Checkpoint(ctx, spec.ID, img, runtime.CheckpointOptions{LeaveRunning: true}); err != nil {
		t.Fatalf("Checkpoint: %v", err)
	}
	fresh := restoreAnswering(t, r, img) // no standby of this shape yet
	checkSupervisorNoted(t, r, fresh)
	waitStandby(t, r, 1)
	adopted := restoreAnswering(t, r, img)
	h, err := r.loadHandle(adopted)
	if err != nil || h.cid() == adopted {
		t.Fatalf("the second restore did not go to a standby container (handle %+v, %v)", h, err)
	}
	checkSupervisorNoted(t, r, adopted)
}

// checkSupervisorNoted checks that r holds sandbox id's process for Wait,
// and that it is the one runsc reports.
func checkSupervisorNoted(t *testing.T, r *Runtime, id string) {
	t.Helper()
	h, err := r.loadHandle(id)
	if err != nil {
		t.Fatal(err)
	}
	v, ok := r.supervisors.Load(h.cid())
	if !ok {
		t.Fatalf("sandbox %s: no sandbox process noted after its create or restore", id)
	}
	st, err := r.runscState(context.Background(), h.cid())
	if err != nil {
		t.Fatal(err)
	}
	if got := v.(supervisor).pid; got != st.Pid {
		t.Fatalf("sandbox %s: noted pid %d, runsc state says %d", id, got, st.Pid)
	}
}
