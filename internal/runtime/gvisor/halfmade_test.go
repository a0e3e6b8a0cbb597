package gvisor

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/forkbox/forkbox/internal/runtime"
	"github.com/forkbox/forkbox/internal/runtime/runtimetest"
)

// TestDestroyKillsHalfMadeContainer: a runsc create or restore that died
// before saving runsc's state leaves a sandbox process runsc delete cannot
// see. Removing the container must kill it (it holds the cgroups). The
// stand-in is a process with runsc's --root and --bundle arguments.
func TestDestroyKillsHalfMadeContainer(t *testing.T) {
	setup(t)
	r, err := newGvisor()
	if err != nil {
		t.Fatal(err)
	}
	cid := runtimetest.NewID()
	bundle := filepath.Join(env.state, "containers", cid)
	// "; :" keeps sh from exec'ing sleep, so the process keeps the flags.
	cmd := exec.Command("/bin/sh", "-c", "sleep 60; :", "runsc-sandbox", "--root="+r.runscRoot(), "boot", "--bundle="+bundle, cid)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() { cmd.Process.Kill() })
	other := exec.Command("/bin/sh", "-c", "sleep 60; :", "runsc-sandbox", "--root="+r.runscRoot(), "boot",
		"--bundle="+filepath.Join(env.state, "containers", runtimetest.NewID()))
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Process.Kill(); other.Wait() })

	r.destroy(context.Background(), cid)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatalf("destroy(%s) left the container's process %d running", cid, cmd.Process.Pid)
	}
	if err := syscall.Kill(other.Process.Pid, 0); err != nil {
		t.Fatalf("destroy(%s) killed another container's process: %v", cid, err)
	}
}

// TestRestoreCancelledLeavesNothing cancels Restore's context at several
// points: it either completes (the sandbox is then deleted) or fails, and
// afterwards nothing of the sandbox is left, no process included.
func TestRestoreCancelledLeavesNothing(t *testing.T) {
	setup(t)
	ctx := context.Background()
	r, err := newGvisor()
	if err != nil {
		t.Fatal(err)
	}
	src := testSpec(runtimetest.NewID(), false)
	startSandbox(t, r, src)
	img := t.TempDir()
	if err := r.Checkpoint(ctx, src.ID, img, runtime.CheckpointOptions{LeaveRunning: true}); err != nil {
		t.Fatal(err)
	}
	for _, after := range []time.Duration{0, 20 * time.Millisecond, 60 * time.Millisecond, 120 * time.Millisecond} {
		spec := testSpec(runtimetest.NewID(), false)
		cctx, cancel := context.WithCancel(ctx)
		time.AfterFunc(after, cancel)
		_, err := r.Restore(cctx, spec, img)
		cancel()
		if err == nil {
			if err := r.Delete(ctx, spec.ID); err != nil {
				t.Fatalf("cancel after %v: Delete: %v", after, err)
			}
		}
		checkClean(t, spec.ID)
		if pids := processesOf(r, spec.ID); len(pids) > 0 {
			t.Errorf("cancel after %v (restore err %v): runsc processes of %s left: %v", after, err, spec.ID, pids)
		}
	}
}

// processesOf lists the pids of processes started with r's --root for
// container cid.
func processesOf(r *Runtime, cid string) []int {
	var pids []int
	for pid, p := range RunscProcesses(r.runscRoot()) {
		if p.Container == cid {
			pids = append(pids, pid)
		}
	}
	return pids
}

// A volume attach directory no handle accounts for (its container was
// replaced by a rollback and the daemon died before removing the old one)
// is unmounted and removed when a runtime starts; the volume it bound is
// left alone.
func TestStartDetachesUnknownVolumes(t *testing.T) {
	setup(t)
	volume := t.TempDir()
	if err := os.WriteFile(filepath.Join(volume, "keep"), []byte("data"), 0o644); err != nil {
		t.Fatal(err)
	}
	// As attachVolumes leaves it: a tmpfs with the volume bound in it.
	dir := filepath.Join(env.state, "volumes", runtimetest.NewID())
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=64k"); err != nil {
		t.Fatalf("tmpfs: %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })
	if err := os.Mkdir(filepath.Join(dir, "0"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount(volume, filepath.Join(dir, "0"), "", syscall.MS_BIND, ""); err != nil {
		t.Fatalf("bind: %v", err)
	}
	if _, err := newGvisor(); err != nil {
		t.Fatalf("gvisor.New: %v", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("attach dir of an unknown container after start: %v, want it gone", err)
	}
	if b, err := os.ReadFile(filepath.Join(volume, "keep")); err != nil || string(b) != "data" {
		t.Errorf("the volume after the attach dir's removal: %q, %v", b, err)
	}
}
