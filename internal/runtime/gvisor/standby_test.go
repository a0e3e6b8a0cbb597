package gvisor

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/forkbox/forkbox/internal/runtime"
	"github.com/forkbox/forkbox/internal/runtime/runtimetest"
)

// newStandbyRuntime is a runtime keeping n standby containers per shape;
// the test ends by closing it and checking that nothing is left.
func newStandbyRuntime(t *testing.T, n int) *Runtime {
	setup(t)
	r, err := New(context.Background(), Config{
		RunscPath: env.runsc, StateDir: env.state, Net: env.net,
		CgroupParent: testCgroupParent, Standby: n,
	})
	if err != nil {
		t.Fatalf("gvisor.New: %v", err)
	}
	t.Cleanup(func() {
		r.Close(context.Background())
		if held := r.standby.held(); len(held) > 0 {
			t.Errorf("standby containers after Close: %v", held)
		}
		checkNoStray(t, r)
	})
	return r
}

// checkNoStray checks that every runsc container, network namespace and
// container bundle belongs to a sandbox with a handle or to r's standby.
func checkNoStray(t *testing.T, r *Runtime) {
	t.Helper()
	r.bg.Wait() // replaced containers still being removed
	known, err := r.knownContainers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range r.standby.held() {
		known[id] = true
	}
	states, err := r.runscList(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for id, st := range states {
		if !known[id] {
			t.Errorf("stray runsc container %s (%s)", id, st.Status)
		}
	}
	nss, _ := os.ReadDir("/var/run/netns")
	for _, e := range nss {
		if id, ok := strings.CutPrefix(e.Name(), testNSPrefix); ok && !known[id] {
			t.Errorf("stray network namespace %s", e.Name())
		}
	}
	bundles, _ := os.ReadDir(r.containersDir())
	for _, e := range bundles {
		if !known[e.Name()] {
			t.Errorf("stray container bundle %s", e.Name())
		}
	}
}

// TestConformanceStandby runs the conformance suite with standby
// containers on, checking for strays after every delete.
func TestConformanceStandby(t *testing.T) {
	setup(t)
	var cur *Runtime
	runtimetest.Run(t, func(t *testing.T) runtime.Runtime {
		cur = newStandbyRuntime(t, 2)
		return cur
	}, runtimetest.Options{
		RootFS:         env.rootfs,
		Args:           runtimetest.PythonServerArgs(testPort),
		Port:           testPort,
		FailArgs:       []string{"/nonexistent/binary"},
		KillSupervisor: killSentry,
		CheckClean: func(t *testing.T, id string) {
			checkClean(t, id)
			checkNoStray(t, cur)
		},
	})
}

// TestStandbyRestore checks that a restore takes a ready standby container
// (the sandbox keeps its own id, runsc knows it by the container's), that
// the sandbox works and that Delete and a restarted runtime leave nothing.
func TestStandbyRestore(t *testing.T) {
	ctx := context.Background()
	r := newStandbyRuntime(t, 1)
	src := testSpec(runtimetest.NewID(), false)
	if _, err := r.Create(ctx, src); err != nil {
		t.Fatal(err)
	}
	defer r.Delete(ctx, src.ID)
	waitAnswer(t, r, src.ID)
	img := t.TempDir()
	if err := r.Checkpoint(ctx, src.ID, img, runtime.CheckpointOptions{LeaveRunning: true}); err != nil {
		t.Fatal(err)
	}
	first := restoreAnswering(t, r, img) // no standby yet: runsc creates one
	if h, _ := r.loadHandle(first); h.cid() != first {
		t.Errorf("first restore used container %s, want its own id", h.cid())
	}
	waitStandby(t, r, 1)
	second := restoreAnswering(t, r, img)
	h, err := r.loadHandle(second)
	if err != nil {
		t.Fatal(err)
	}
	if h.cid() == second || h.Bundle != filepath.Join(r.containersDir(), h.cid()) {
		t.Fatalf("second restore did not take the standby container: %+v", h)
	}
	sharesPath := filepath.Join(cgroupRoot, "cpu", r.cgroupsPath(h.cid()), "cpu.shares")
	if b, err := os.ReadFile(sharesPath); err != nil || strings.TrimSpace(string(b)) != "1024" {
		t.Errorf("adopted container's cpu.shares = %q (%v), want the default 1024", b, err)
	}
	waitStandby(t, r, 1)
	r.standby.mu.Lock()
	var ready standbyBox
	for _, p := range r.standby.pools {
		ready = p.boxes[0]
	}
	r.standby.mu.Unlock()
	sharesPath = filepath.Join(cgroupRoot, "cpu", r.cgroupsPath(ready.cid), "cpu.shares")
	if b, err := os.ReadFile(sharesPath); err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(standbyCPUShares) {
		t.Errorf("standby container's cpu.shares = %q (%v), want %d", b, err, standbyCPUShares)
	}
	if err := r.Freeze(ctx, second); err != nil {
		t.Errorf("Freeze through the container id: %v", err)
	}
	if info, _ := r.Info(ctx, second); info.State != runtime.StatePaused {
		t.Errorf("state after Freeze %s", info.State)
	}
	if err := r.Thaw(ctx, second); err != nil {
		t.Errorf("Thaw: %v", err)
	}
	if st, err := r.Stats(ctx, second); err != nil || st.MemoryBytes == 0 {
		t.Errorf("Stats through the container id: %+v %v", st, err)
	}
	if err := r.Delete(ctx, second); err != nil {
		t.Fatal(err)
	}
	checkClean(t, second)
	checkClean(t, h.cid())
	r.Delete(ctx, first)
	waitStandby(t, r, 1)
	// A daemon killed with standby containers, and between making a sandbox
	// directory and saving its handle: the next runtime removes both.
	orphan := filepath.Join(env.state, "sandboxes", runtimetest.NewID())
	if err := os.Mkdir(orphan, 0o700); err != nil {
		t.Fatal(err)
	}
	// ... and a create killed after making its bundle and cgroups.
	killedCID := runtimetest.NewID()
	if err := os.Mkdir(filepath.Join(r.containersDir(), killedCID), 0o700); err != nil {
		t.Fatal(err)
	}
	var killedCgroups []string
	for _, c := range []string{"cpu", "memory", "pids"} {
		dir := filepath.Join(cgroupRoot, c, r.cgroupsPath(killedCID))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		killedCgroups = append(killedCgroups, dir)
	}
	r2, err := New(ctx, Config{RunscPath: env.runsc, StateDir: env.state, Net: env.net, CgroupParent: testCgroupParent})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range r.standby.held() {
		checkClean(t, id)
	}
	for _, p := range append(killedCgroups, orphan, filepath.Join(r.containersDir(), killedCID)) {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s survived a restart: %v", p, err)
		}
	}
	r.standby = newStandby(r, 0) // already removed by r2
	checkNoStray(t, r2)
}

// restoreAnswering restores img as a new sandbox and waits for its server.
func restoreAnswering(t *testing.T, r *Runtime, img string) string {
	t.Helper()
	spec := testSpec(runtimetest.NewID(), false)
	if _, err := r.Restore(context.Background(), spec, img); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	t.Cleanup(func() { r.Delete(context.Background(), spec.ID) })
	waitAnswer(t, r, spec.ID)
	return spec.ID
}

// waitStandby waits until r holds n ready standby containers.
func waitStandby(t *testing.T, r *Runtime, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		r.standby.mu.Lock()
		ready := 0
		for _, p := range r.standby.pools {
			ready += len(p.boxes)
		}
		r.standby.mu.Unlock()
		if ready >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d standby containers after 30 s, want %d", ready, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestStandbyEvictsOldestShape: asking for a fifth shape drops the least
// recently used one, never the shape just asked for. (No runsc: the filler
// is marked started so none runs.)
// Map order is random, so the scenario runs many times.
func TestStandbyEvictsOldestShape(t *testing.T) {
	r := &Runtime{cfg: Config{Defaults: runtime.Resources{CPUCount: 1, MemoryMB: 512, PidsMax: 1024}}}
	specs := make([]runtime.Spec, maxShapes+1)
	for i := range specs {
		specs[i] = runtime.Spec{RootFS: "/rootfs" + strconv.Itoa(i)}
	}
	for round := 0; round < 50; round++ {
		s := newStandby(r, 1)
		s.started = true
		for _, spec := range specs {
			s.begin()
			s.end(spec)
			time.Sleep(10 * time.Microsecond) // distinct lastUsed stamps
		}
		if len(s.pools) != maxShapes {
			t.Fatalf("%d shapes kept, want %d", len(s.pools), maxShapes)
		}
		if _, ok := s.pools[s.shapeOf(specs[0])]; ok {
			t.Fatalf("round %d: the least recently used shape was kept", round)
		}
		if _, ok := s.pools[s.shapeOf(specs[maxShapes])]; !ok {
			t.Fatalf("round %d: the shape just asked for was evicted", round)
		}
	}
}
