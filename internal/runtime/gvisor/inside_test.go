package gvisor

import (
	"context"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/forkbox/forkbox/internal/runtime"
	"github.com/forkbox/forkbox/internal/runtime/runtimetest"
)

// shServer answers GET /procs (ready) and GET /sh?c=… with the output of
// `sh -c …` (stdout and stderr, then "rc=N").
const shServer = `
import http.server, socketserver, subprocess, sys, urllib.parse
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        u = urllib.parse.urlparse(self.path)
        if u.path == "/procs":
            body = "ok"
        else:
            c = urllib.parse.parse_qs(u.query)["c"][0]
            p = subprocess.run(["sh", "-c", c], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=30)
            body = p.stdout.decode(errors="replace") + "rc=%d" % p.returncode
        b = body.encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(b)))
        self.end_headers()
        self.wfile.write(b)
    def log_message(self, *a):
        pass
class S(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = True
S(("0.0.0.0", int(sys.argv[1])), H).serve_forever()
`

// forkBomb forks as uid 1000 until fork fails and prints the errno. The
// children exec sleep: a forked python copies megabytes of its heap as its
// reference counts change, so it would meet the memory limit first.
const forkBomb = `su user -s /bin/sh -c 'python3 -c "
import os, signal, time
kids, out = [], \"no error\"
try:
    while len(kids) < 20000:
        k = os.fork()
        if k == 0:
            os.execv(\"/bin/sleep\", [\"sleep\", \"20\"])
        kids.append(k)
except OSError as e:
    out = \"errno %d\" % e.errno
print(out, \"after\", len(kids), flush=True)
for k in kids: os.kill(k, signal.SIGKILL)
for k in kids: os.waitpid(k, 0)
"'`

// sh runs c in sandbox id through shServer.
func sh(t *testing.T, r *Runtime, id, c string) string {
	t.Helper()
	start := time.Now()
	out, err := getWithin(r, id, "/sh?c="+url.QueryEscape(c), time.Minute)
	t.Logf("%.40q took %v", c, time.Since(start))
	if err != nil {
		t.Fatalf("sh %q in %s: %v", c, id, err)
	}
	return out
}

// The sandbox sees what it was given and meets its limits inside: MemTotal
// = MemoryMB, / and /tmp of DiskMB with ENOSPC past them, a fork bomb gets
// EAGAIN; afterwards it runs, freezes and thaws, and a restore of it (what
// pool, standby, fork and resume do) keeps the file sizes and the task
// limit and reports the restoring container's MemTotal.
func TestSandboxMeetsItsLimitsInside(t *testing.T) {
	r := newStandbyRuntime(t, 1)
	ctx := context.Background()
	spec := testSpec(runtimetest.NewID(), false)
	spec.Args = []string{"python3", "-c", shServer, strconv.Itoa(testPort)}
	spec.Resources = runtime.Resources{CPUCount: 2, MemoryMB: 300, PidsMax: 100, DiskMB: 100}
	startSandbox(t, r, spec)
	checkSees(t, r, spec.ID, 300, 100)
	if out := sh(t, r, spec.ID, forkBomb); !strings.Contains(out, "errno 11 after") {
		t.Errorf("fork bomb: %q, want EAGAIN (errno 11)", out)
	} else if n, _ := strconv.Atoi(strings.Fields(out[strings.Index(out, "after"):])[1]); n < 50 || n > 100 {
		t.Errorf("fork bomb: %d forks before EAGAIN, want about PidsMax (100)", n)
	}
	for _, path := range []string{"/fill", "/tmp/fill"} {
		out := sh(t, r, spec.ID, "dd if=/dev/zero of="+path+" bs=1M count=300; rm -f "+path)
		if !strings.Contains(out, "No space left on device") {
			t.Errorf("dd of 300 MiB to %s on a 100 MiB disk: %q, want ENOSPC", path, out)
		}
	}
	if info, err := r.Info(ctx, spec.ID); err != nil || info.State != runtime.StateRunning {
		t.Fatalf("after the abuse: %+v, %v; want running", info, err)
	}
	if err := r.Freeze(ctx, spec.ID); err != nil {
		t.Fatalf("Freeze: %v", err)
	}
	if err := r.Thaw(ctx, spec.ID); err != nil {
		t.Fatalf("Thaw: %v", err)
	}
	img := t.TempDir()
	if err := r.Checkpoint(ctx, spec.ID, img, runtime.CheckpointOptions{LeaveRunning: true}); err != nil {
		t.Fatalf("Checkpoint: %v", err)
	}
	clone := spec
	clone.ID = runtimetest.NewID()
	clone.Resources.MemoryMB = 200 // MemTotal follows; a restore refuses other file sizes
	if _, err := r.Restore(ctx, clone, img); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	t.Cleanup(func() { r.Delete(ctx, clone.ID) })
	waitAnswer(t, r, clone.ID)
	checkSees(t, r, clone.ID, 200, 100)
	if out := sh(t, r, clone.ID, "grep 'Max processes' /proc/self/limits"); !strings.Contains(out, " 100 ") {
		t.Errorf("the restored sandbox's task limit: %q, want 100", out)
	}
}

// checkSees checks MemTotal, the CPUs and the sizes of / and /tmp.
func checkSees(t *testing.T, r *Runtime, id string, memMB, diskMB int) {
	t.Helper()
	if out := sh(t, r, id, "grep MemTotal /proc/meminfo"); !strings.Contains(out, " "+strconv.Itoa(memMB<<10)+" kB") {
		t.Errorf("MemTotal: %q, want %d kB", out, memMB<<10)
	}
	if out := sh(t, r, id, "nproc"); !strings.HasPrefix(out, "2\n") {
		t.Errorf("nproc: %q, want 2", out)
	}
	out := sh(t, r, id, "df -m --output=size / /tmp | tail -n +2 | tr -d ' '")
	if want := strings.Repeat(strconv.Itoa(diskMB)+"\n", 2) + "rc=0"; out != want {
		t.Errorf("df -m of / and /tmp: %q, want %q", out, want)
	}
}

// /tmp is the sized root overlay's: files there and in / share DiskMB,
// and a filesystem-only save keeps them for the boot from it.
func TestTmpIsTheDisk(t *testing.T) {
	r := newRuntime(t).(*Runtime)
	ctx := context.Background()
	spec := startShell(t, r, runtime.Resources{CPUCount: 2, MemoryMB: 256, PidsMax: 100, DiskMB: 100})
	out := sh(t, r, spec.ID, "mkdir /tmp/d && echo kept > /tmp/d/f && dd if=/dev/zero of=/fill bs=1M count=60 2>/dev/null && "+
		"dd if=/dev/zero of=/tmp/fill bs=1M count=60; rm -f /fill /tmp/fill")
	if !strings.Contains(out, "No space left on device") {
		t.Errorf("60 MiB to / and 60 MiB to /tmp of a 100 MiB disk: %q, want ENOSPC", out)
	}
	if err := r.Freeze(ctx, spec.ID); err != nil {
		t.Fatal(err)
	}
	files := t.TempDir()
	if err := r.SaveFilesystem(ctx, spec.ID, files); err != nil {
		t.Fatal(err)
	}
	booted := spec
	booted.ID = runtimetest.NewID()
	if _, err := r.CreateFromFilesystem(ctx, booted, files); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Delete(ctx, booted.ID) })
	waitAnswer(t, r, booted.ID)
	if out := sh(t, r, booted.ID, "cat /tmp/d/f; df -m --output=size /tmp | tail -1"); !strings.HasPrefix(out, "kept\n") || !strings.Contains(out, " 100\n") {
		t.Errorf("booted from the saved files: %q, want /tmp/d/f kept and a 100 MiB /tmp", out)
	}
}

// A 1-CPU sandbox has one CPU, and every way of asking says so; a restore
// of it keeps the count.
func TestOneCPU(t *testing.T) {
	r := newRuntime(t).(*Runtime)
	ctx := context.Background()
	spec := startShell(t, r, runtime.Resources{CPUCount: 1, MemoryMB: 256, PidsMax: 100, DiskMB: 100})
	const see = "nproc; python3 -c 'import os; print(os.cpu_count())'; grep -c ^processor /proc/cpuinfo; cat /sys/devices/system/cpu/online"
	want := "1\n1\n1\n0-0\nrc=0"
	if out := sh(t, r, spec.ID, see); out != want {
		t.Errorf("CPUs seen: %q, want %q", out, want)
	}
	img := t.TempDir()
	if err := r.Checkpoint(ctx, spec.ID, img, runtime.CheckpointOptions{LeaveRunning: true}); err != nil {
		t.Fatal(err)
	}
	clone := spec
	clone.ID = runtimetest.NewID()
	if _, err := r.Restore(ctx, clone, img); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Delete(ctx, clone.ID) })
	waitAnswer(t, r, clone.ID)
	if out := sh(t, r, clone.ID, see); out != want {
		t.Errorf("CPUs seen after a restore: %q, want %q", out, want)
	}
}

// startShell starts a sandbox of res running shServer (see sh).
func startShell(t *testing.T, r *Runtime, res runtime.Resources) runtime.Spec {
	t.Helper()
	spec := testSpec(runtimetest.NewID(), false)
	spec.Args = []string{"python3", "-c", shServer, strconv.Itoa(testPort)}
	spec.Resources = res
	startSandbox(t, r, spec)
	return spec
}
