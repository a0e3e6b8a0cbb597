package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/forkbox/forkbox/client"
	"github.com/forkbox/forkbox/internal/runtime/gvisor"
)

// result is a command's output and exit code.
type result struct {
	stdout, stderr string
	code           int
}

// run1 runs shell command cmd in conn's sandbox.
func run1(ctx context.Context, conn *client.SandboxConn, cmd string) (result, error) {
	var out, errb bytes.Buffer
	code, err := conn.Exec(ctx, client.ExecOptions{Shell: cmd, Stdout: &out, Stderr: &errb})
	return result{stdout: out.String(), stderr: errb.String(), code: code}, err
}

// killSentry SIGKILLs sandbox id's runsc sandbox process and returns how
// long until GET /sandboxes/{id} answers killed, in ms.
func killSentry(ctx context.Context, b *build, id string) (float64, error) {
	conn, err := b.cl.Connect(ctx, id, 0)
	if err != nil {
		return 0, err
	}
	if _, err := run1(ctx, conn.Conn(), "echo up"); err != nil {
		return 0, err
	}
	cid, err := containerOf(b, id)
	if err != nil {
		return 0, err
	}
	pid := gvisor.SentryPid(filepath.Join(b.d.DataDir, "runtime", "runsc"), cid)
	if pid == 0 {
		return 0, fmt.Errorf("no runsc-sandbox process of %s", cid)
	}
	t0 := time.Now()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return 0, err
	}
	for time.Since(t0) < 10*time.Second {
		info, err := b.cl.GetSandbox(ctx, id)
		if err == nil && info.State == "killed" {
			return ms(time.Since(t0)), nil
		}
		time.Sleep(2 * time.Millisecond)
	}
	return 0, fmt.Errorf("sandbox %s not reported killed 10 s after its sentry died", id)
}

func containerOf(b *build, id string) (string, error) {
	cg, err := b.cgroup(id)
	return filepath.Base(cg), err
}

// statSum adds keys' values in a cgroup stat file of "key value" lines.
func statSum(path string, keys ...string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	var sum int64
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, " ")
		if ok && slices.Contains(keys, k) {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return 0, fmt.Errorf("%s: %q: %w", path, line, err)
			}
			sum += n
		}
	}
	return sum, nil
}

func readInt(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(v))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// load is the host's load average over the last minute, for the record.
func load() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return "?"
	}
	return f[0]
}

func report(c config, builds []*build, hr headroomResult, deaths []float64) {
	before, after := builds[0], builds[1]
	fmt.Printf("\n## Limits: their cost and a death's notice (bench/limits)\n\n")
	fmt.Printf("`go run ./bench/limits -bin ./bin -template-dir /tmp/tpl-after -before-bin <02a915d^ built in a temporary "+
		"worktree>/bin -before-template-dir /tmp/tpl-before` (the command's doc comment sets them up) on %s "+
		"(2 cores, load average %s at the end: other work ran). Each build has its own daemon and templates (pool off: every "+
		"create is a restore of the base template's image), both up at once; creates alternate between them in %d rounds of %d.\n\n",
		time.Now().UTC().Format("2006-01-02 15:04 UTC"), load(), c.rounds, c.n)
	fmt.Printf("| base sandbox | before the limits | with the limits | ratio |\n|---|---:|---:|---:|\n")
	fmt.Printf("| create → first command p50 (n=%d) | %.0f ms | %.0f ms | %.2f |\n", len(after.create),
		median(before.create), median(after.create), median(after.create)/median(before.create))
	fmt.Printf("| host memory per idle sandbox p50 (its memory cgroup's usage, n=%d) | %.1f MiB | %.1f MiB | %.2f |\n", len(after.idle),
		median(before.idle), median(after.idle), median(after.idle)/median(before.idle))
	fmt.Printf("| of which its own (rss + shmem: without template files' page cache, charged to the first reader) | %.1f MiB | %.1f MiB | %.2f |\n\n",
		median(before.own), median(after.own), median(after.own)/median(before.own))
	fmt.Printf("Memory headroom, a `memoryMB: %d` sandbox with the limits running a Python hog (16 MiB steps): "+
		"the hog's allocation fails with **%s** at %d MiB (exit %d, `%s`); the sandbox's host cgroup limit is %.0f MiB "+
		"(memoryMB × 1.25 + 128 + ½ per task + the disk), its usage %.0f MiB idle and %.0f MiB at its peak. "+
		"So the guest's processes get %d of %d MiB (%.0f%%; the rest is the guard's reserve), and the host keeps %.0f MiB "+
		"above the peak unused: a ceiling, not an allocation — an idle sandbox costs the host what it uses.\n\n",
		hr.memoryMB, hr.outcome, hr.reachedMiB, hr.exit, hr.stderrTail, hr.limitMiB, hr.idleMiB, hr.peakMiB,
		hr.reachedMiB, hr.memoryMB, 100*float64(hr.reachedMiB)/float64(hr.memoryMB), hr.limitMiB-hr.peakMiB)
	var s []string
	for _, d := range deaths {
		s = append(s, fmt.Sprintf("%.0f", d))
	}
	fmt.Printf("A sentry's death: `kill -9` of a running sandbox's `runsc-sandbox` process from outside, then "+
		"`GET /sandboxes/{id}` every 2 ms until `state: killed`: median **%.0f ms** of %d (%s ms).\n",
		median(deaths), len(deaths), strings.Join(s, ", "))
}
