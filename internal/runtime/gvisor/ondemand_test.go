package gvisor

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/forkbox/forkbox/internal/runtime"
	"github.com/forkbox/forkbox/internal/runtime/runtimetest"
)

// onDemandHog touches every page of 128 MiB in a background python, then
// marks /tmp/hog; 64 MiB of random bytes go to /dev/shm/big (sentry
// tmpfs, in the same memory file) with their checksum next to them.
const onDemandHog = `nohup python3 -c "
import time
b = bytearray(128 << 20)
[b.__setitem__(i, 1) for i in range(0, len(b), 4096)]
open('/tmp/hog', 'w').write('ready')
time.sleep(86400)
" >/dev/null 2>&1 &
echo $! >/tmp/hog.pid
head -c 64M /dev/urandom >/dev/shm/big && md5sum /dev/shm/big >/tmp/big.md5
echo source >/tmp/mark; echo source >/dev/shm/mark
until [ -s /tmp/hog ]; do sleep 0.1; done; echo hogready`

// onDemandLimit is the memory file a clone of the ~192 MiB source may
// hold after it answered: far less than a copy of its image.
const onDemandLimit = 96 << 20

// Restores on demand (patches/gvisor/0001, runsc --restore-on-demand):
// clones of one image hold only the pages they touched, not a copy of the
// image each; what they read is the image's content; writes in one clone
// are seen in no other; a checkpoint of a clone loads the pages it never
// touched first, so an image of it restores whole; and EagerRestore turns
// it off. Fails on an unpatched runsc.
func TestRestoreOnDemand(t *testing.T) {
	r := onDemandRuntime(t)
	ctx := context.Background()
	spec := testSpec(runtimetest.NewID(), false)
	spec.Args = []string{"python3", "-c", shServer, "49983"}
	spec.Resources = runtime.Resources{CPUCount: 1, MemoryMB: 512}
	startSandbox(t, r, spec)
	if out := sh(t, r, spec.ID, onDemandHog); !strings.Contains(out, "hogready") {
		t.Fatalf("hog: %q", out)
	}
	if src := memoryFile(t, r, spec.ID); src < 192<<20 {
		t.Fatalf("source memory file %d MiB, want ≥ 192 (the hog and /dev/shm/big)", src>>20)
	}
	img := t.TempDir()
	if err := r.Checkpoint(ctx, spec.ID, img, runtime.CheckpointOptions{LeaveRunning: true}); err != nil {
		t.Fatalf("Checkpoint: %v", err)
	}
	a, b := restoreClone(t, r, spec, img), restoreClone(t, r, spec, img)
	time.Sleep(2 * time.Second) // an eager or background load would be done
	for _, id := range []string{a, b} {
		if n := memoryFile(t, r, id); n > onDemandLimit {
			t.Errorf("clone %s holds %d MiB of memory file, want ≤ %d: its pages were copied, not loaded on demand", id, n>>20, onDemandLimit>>20)
		}
	}
	sh(t, r, a, "echo A >/tmp/mark; echo A >/dev/shm/mark")
	checkMarks(t, r, a, "A")
	checkMarks(t, r, b, "source")
	checkMarks(t, r, spec.ID, "source")
	checkBig(t, r, a)

	// A checkpoint of a clone that loaded almost nothing must save all of it.
	img2 := t.TempDir()
	if err := r.Checkpoint(ctx, b, img2, runtime.CheckpointOptions{LeaveRunning: true}); err != nil {
		t.Fatalf("Checkpoint of a clone restored on demand: %v", err)
	}
	c := restoreClone(t, r, spec, img2)
	checkMarks(t, r, c, "source")
	checkBig(t, r, c)
	if out := sh(t, r, c, "kill -0 $(cat /tmp/hog.pid) && echo alive"); !strings.HasPrefix(out, "alive") {
		t.Errorf("clone of a clone: the hog %q", out)
	}

	cfg := r.cfg
	cfg.EagerRestore = true
	eager, err := New(ctx, cfg)
	if err != nil {
		t.Fatalf("gvisor.New with EagerRestore: %v", err)
	}
	if eager.RestoresOnDemand() {
		t.Fatal("EagerRestore: the runtime still restores on demand")
	}
	e := restoreClone(t, eager, spec, img)
	time.Sleep(2 * time.Second)
	if n := memoryFile(t, r, e); n < 192<<20 {
		t.Errorf("eager clone %s holds %d MiB of memory file, want the whole image (≥ 192)", e, n>>20)
	}
}

// onDemandRuntime is a runtime that restores on demand; it fails the test
// on an unpatched runsc.
func onDemandRuntime(t *testing.T) *Runtime {
	t.Helper()
	setup(t)
	r, err := newGvisor()
	if err != nil {
		t.Fatalf("gvisor.New: %v", err)
	}
	if !r.RestoresOnDemand() {
		t.Fatalf("runsc %s cannot restore on demand (--restore-on-demand): build it with scripts/build-runsc.sh, which applies patches/gvisor", env.runsc)
	}
	return r
}

// restoreClone restores img as a new sandbox of spec's shape and waits
// until it answers; it is deleted at test end.
func restoreClone(t *testing.T, r *Runtime, spec runtime.Spec, img string) string {
	t.Helper()
	clone := spec
	clone.ID = runtimetest.NewID()
	if _, err := r.Restore(context.Background(), clone, img); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	t.Cleanup(func() { r.Delete(context.Background(), clone.ID) })
	waitAnswer(t, r, clone.ID)
	return clone.ID
}

func checkMarks(t *testing.T, r *Runtime, id, want string) {
	t.Helper()
	if out := sh(t, r, id, "cat /tmp/mark /dev/shm/mark"); out != want+"\n"+want+"\nrc=0" {
		t.Errorf("marks in %s: %q, want %q twice", id, out, want)
	}
}

// checkBig checks /dev/shm/big against the checksum the source took.
func checkBig(t *testing.T, r *Runtime, id string) {
	t.Helper()
	if out := sh(t, r, id, "md5sum -c /tmp/big.md5"); !strings.Contains(out, "OK") || !strings.HasSuffix(out, "rc=0") {
		t.Errorf("/dev/shm/big in %s: %q", id, out)
	}
}

// memoryFile is the allocated size of sandbox id's sentry memory file
// (memfd "runsc-memory"): the guest memory it holds.
func memoryFile(t *testing.T, r *Runtime, id string) int64 {
	t.Helper()
	h, err := r.loadHandle(id)
	if err != nil {
		t.Fatal(err)
	}
	pid := sentryPID(t, h.cid())
	dir := filepath.Join("/proc", pid, "fd")
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		if l, err := os.Readlink(p); err != nil || !strings.HasPrefix(l, "/memfd:runsc-memory") {
			continue
		}
		var st syscall.Stat_t
		if syscall.Stat(p, &st) == nil {
			total += st.Blocks * 512
		}
	}
	t.Logf("%s: memory file %d MiB", id, total>>20)
	return total
}

// sentryPID finds the runsc-sandbox process of container cid.
func sentryPID(t *testing.T, cid string) string {
	t.Helper()
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if strings.HasPrefix(args[0], "runsc-sandbox") && args[len(args)-2] == cid {
			return e.Name()
		}
	}
	t.Fatalf("no runsc-sandbox process for %s", cid)
	return ""
}

// A sandbox restored on demand idles like one restored eagerly: its sentry
// is not woken over and over while nothing in it runs. (The page loader of
// patches/gvisor/0001 once held a restore timeline for the sandbox's whole
// life, and the restore's Timer.End slept 1ms in a loop waiting for it: a
// thousand wake-ups a second in every restored sandbox.)
func TestRestoreOnDemandIdles(t *testing.T) {
	r := onDemandRuntime(t)
	spec := testSpec(runtimetest.NewID(), false)
	spec.Args = []string{"python3", "-c", shServer, "49983"}
	spec.Resources = runtime.Resources{CPUCount: 1, MemoryMB: 256}
	startSandbox(t, r, spec)
	img := t.TempDir()
	if err := r.Checkpoint(context.Background(), spec.ID, img, runtime.CheckpointOptions{LeaveRunning: true}); err != nil {
		t.Fatalf("Checkpoint: %v", err)
	}
	clone := restoreClone(t, r, spec, img)
	h, err := r.loadHandle(clone)
	if err != nil {
		t.Fatal(err)
	}
	pid := sentryPID(t, h.cid())
	time.Sleep(2 * time.Second) // the restore's own work is over
	const window = 3 * time.Second
	before := contextSwitches(t, pid)
	time.Sleep(window)
	perSecond := float64(contextSwitches(t, pid)-before) / window.Seconds()
	t.Logf("idle clone's sentry: %.0f context switches/s", perSecond)
	// Idle, the sentry switches a few dozen times a second; the bug made
	// it at least 1000.
	if perSecond > 400 {
		t.Errorf("an idle sandbox restored on demand: its sentry switched %.0f times/s, want ≤ 400", perSecond)
	}
}

// contextSwitches sums the voluntary and involuntary context switches of
// every thread of process pid.
func contextSwitches(t *testing.T, pid string) int64 {
	t.Helper()
	tasks, err := filepath.Glob(filepath.Join("/proc", pid, "task", "*", "status"))
	if err != nil || len(tasks) == 0 {
		t.Fatalf("threads of %s: %v", pid, err)
	}
	var n int64
	for _, p := range tasks {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // a thread that exited
		}
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.HasSuffix(k, "ctxt_switches") {
				c, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				n += c
			}
		}
	}
	return n
}
