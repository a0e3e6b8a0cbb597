package codeinterp

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// kernelPID returns the process id of lang's default kernel.
func (ts *testServer) kernelPID(lang string) int {
	ts.t.Helper()
	c, err := ts.srv.defaultContext(context.Background(), lang)
	if err != nil {
		ts.t.Fatal(err)
	}
	k, ok := c.kernel().(*jupyterKernel)
	if !ok {
		ts.t.Fatalf("%s: no Jupyter kernel", lang)
	}
	return k.p.pid
}

// A Python kernel whose allocations fail, as the out-of-memory guard makes
// them when memory gets short (RLIMIT_AS lowered to what the process has
// mapped), fails the growing cell with MemoryError and lives on with its
// state once the limit is given back.
func TestCappedKernelRaisesMemoryError(t *testing.T) {
	ts := newTestServer(t)
	ts.run("keep = 'kept'")
	pid := ts.kernelPID("python")
	// Grows by 1 MB every 5 ms, at most 300 MB, until an allocation fails.
	code := "import time\nhog = []\nprint('growing', flush=True)\n" +
		"for _ in range(300):\n    hog.append(bytearray(10**6))\n    time.sleep(0.005)"
	var old unix.Rlimit
	var res execResult
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ts.stream(ctx, map[string]any{"code": code}, func(e event) bool {
		res.events = append(res.events, e)
		if e.typ() == "stdout" {
			if err := unix.Prlimit(pid, unix.RLIMIT_AS, nil, &old); err != nil {
				t.Fatal(err)
			}
			capped := unix.Rlimit{Cur: mappedBytes(t, pid), Max: old.Max}
			ts.srv.NoteOutOfMemory(pid)
			if err := unix.Prlimit(pid, unix.RLIMIT_AS, &capped, nil); err != nil {
				t.Fatal(err)
			}
		}
		return e.typ() != "end_of_execution"
	})
	if err := unix.Prlimit(pid, unix.RLIMIT_AS, &old, nil); err != nil {
		t.Fatal(err)
	}
	if e := res.err(); e == nil || e["name"] != "MemoryError" {
		t.Fatalf("a growing cell whose allocations fail: %v, want MemoryError", res.events)
	}
	if got := mustMain(t, ts.run("len(hog) < 300, keep")); got != "(True, 'kept')" {
		t.Errorf("after the MemoryError: %s", got)
	}
	if ts.kernelPID("python") != pid {
		t.Error("the kernel was replaced")
	}
}

// mappedBytes is pid's mapped memory (statm's size), what the guard lowers
// RLIMIT_AS to.
func mappedBytes(t *testing.T, pid int) uint64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "statm"))
	if err != nil {
		t.Fatal(err)
	}
	pages, _ := strconv.ParseUint(strings.Fields(string(b))[0], 10, 64)
	return pages * uint64(os.Getpagesize())
}

// A kernel the out-of-memory guard kills says so in its DeadKernelError.
func TestOOMKillIsReported(t *testing.T) {
	ts := newTestServer(t)
	for _, lang := range []string{"python", "js"} {
		pid := ts.kernelPID(lang)
		code := map[string]string{"python": "print('go', flush=True)\nimport time\ntime.sleep(60)",
			"js": "console.log('go')\nrequire('child_process').execSync('sleep 60')"}[lang]
		var res execResult
		ts.stream(context.Background(), map[string]any{"code": code, "language": lang}, func(e event) bool {
			res.events = append(res.events, e)
			if e.typ() == "stdout" {
				// The guard kills the largest process: for JavaScript
				// that is the session process, in the kernel's group.
				victim := largestInGroup(t, pid)
				ts.srv.NoteOutOfMemory(pid)
				syscall.Kill(victim, syscall.SIGKILL)
			}
			return true
		})
		e := res.err()
		if e == nil || e["name"] != "DeadKernelError" || !strings.Contains(str(e["value"]), "ran out of memory") {
			t.Errorf("%s: an out-of-memory kill gave %v", lang, res.events)
		}
		if r := ts.exec(map[string]any{"code": "1 + 1", "language": lang}); str(r.main()["text"]) != "2" {
			t.Errorf("%s: the next cell after the kill: %v", lang, r.events)
		}
	}
}

// largestInGroup returns the process of group pgid with the most resident
// memory, as the out-of-memory guard would pick it.
func largestInGroup(t *testing.T, pgid int) int {
	t.Helper()
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	best, bestRSS := 0, 0
	for _, st := range stats {
		b, err := os.ReadFile(st)
		if err != nil {
			continue
		}
		f := strings.Fields(string(b)[strings.LastIndexByte(string(b), ')')+1:])
		if len(f) < 22 || f[2] != strconv.Itoa(pgid) {
			continue
		}
		if rss, _ := strconv.Atoi(f[21]); rss > bestRSS {
			best, _ = strconv.Atoi(filepath.Base(filepath.Dir(st)))
			bestRSS = rss
		}
	}
	if best == 0 {
		t.Fatalf("no process in group %d", pgid)
	}
	return best
}
