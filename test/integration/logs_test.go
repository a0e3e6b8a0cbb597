package integration

import (
	"bufio"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/forkbox/forkbox/client"
	"github.com/forkbox/forkbox/internal/daemon/daemontest"
)

// exitWith runs `exit code` in the sandbox and checks the exit code came back.
func exitWith(t *testing.T, ctx context.Context, conn *client.SandboxConn, code int) {
	t.Helper()
	got, err := conn.Exec(ctx, client.ExecOptions{Shell: fmt.Sprintf("exit %d", code)})
	if err != nil || got != code {
		t.Fatalf("exit %d: got %d, %v", code, got, err)
	}
}

// logLines renders a sandbox's log as "message fields" lines, oldest first.
func logLines(t *testing.T, ctx context.Context, c *client.Client, id string) []string {
	t.Helper()
	entries, err := c.Logs(ctx, id, client.LogsOptions{})
	if err != nil {
		t.Fatalf("logs of %s: %v", id, err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Timestamp.UTC().Format(time.RFC3339Nano)+" "+e.Message+" exitCode="+e.Fields["exitCode"])
	}
	return out
}

// countContaining counts the lines holding every one of subs.
func countContaining(lines []string, subs ...string) int {
	n := 0
	for _, l := range lines {
		if !slices.ContainsFunc(subs, func(s string) bool { return !strings.Contains(l, s) }) {
			n++
		}
	}
	return n
}

// TestLogsSurviveDaemonRestart kills the daemon with SIGKILL and restarts
// it: a running and a paused sandbox keep their logs as they were (the
// daemon's lifecycle events and the agent's process events it had
// collected), a process exit the agent reported only after the restart
// is collected then, and nothing is logged twice.
func TestLogsSurviveDaemonRestart(t *testing.T) {
	ctx := daemontest.Context(t)
	d, c := start(t)
	run := create(t, ctx, c, client.CreateOptions{})
	exitWith(t, ctx, run.Conn(), 3)
	if err := c.Pause(ctx, run.SandboxID); err != nil {
		t.Fatal(err)
	}
	resumed, err := c.Connect(ctx, run.SandboxID, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	paused := create(t, ctx, c, client.CreateOptions{})
	exitWith(t, ctx, paused.Conn(), 4)
	if err := c.Pause(ctx, paused.SandboxID); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, func() bool {
		return countContaining(logLines(t, ctx, c, paused.SandboxID), "sandbox paused") == 1
	})
	beforeRun, beforePaused := logLines(t, ctx, c, run.SandboxID), logLines(t, ctx, c, paused.SandboxID)
	for _, want := range []string{"sandbox created", "exitCode=3", "sandbox paused", "sandbox resumed"} {
		if countContaining(beforeRun, want) != 1 {
			t.Fatalf("before the restart, %q once in %q", want, beforeRun)
		}
	}
	// Reported by the agent but not collected before the daemon dies.
	exitWith(t, ctx, resumed.Conn(), 5)

	d.Kill9()
	d.Restart()

	afterPaused := logLines(t, ctx, c, paused.SandboxID)
	if !slices.Equal(afterPaused[:min(len(beforePaused), len(afterPaused))], beforePaused) {
		t.Errorf("the paused sandbox's log changed across the restart:\nbefore %q\nafter  %q", beforePaused, afterPaused)
	}
	afterRun := logLines(t, ctx, c, run.SandboxID)
	if len(afterRun) < len(beforeRun) || !slices.Equal(afterRun[:len(beforeRun)], beforeRun) {
		t.Errorf("the running sandbox's log lost entries across the restart:\nbefore %q\nafter  %q", beforeRun, afterRun)
	}
	for _, want := range []string{"exitCode=3", "exitCode=5", "sandbox resumed"} {
		if n := countContaining(afterRun, want); n != 1 {
			t.Errorf("after the restart, %q %d times in %q, want once", want, n, afterRun)
		}
	}
	if _, err := c.Connect(ctx, paused.SandboxID, time.Minute); err != nil {
		t.Fatal(err)
	}
	if got := logLines(t, ctx, c, paused.SandboxID); countContaining(got, "exitCode=4") != 1 || countContaining(got, "sandbox resumed") != 1 {
		t.Errorf("the paused sandbox resumed after the restart: %q", got)
	}
}

// TestCLILogsFollow runs `forkbox sandbox logs <id> -f` (the built binary)
// against a real daemon: it prints the log so far, then each new entry as
// the sandbox runs a command, pauses and resumes, and exits 0 once the
// sandbox is killed.
func TestCLILogsFollow(t *testing.T) {
	ctx := daemontest.Context(t)
	d, c := start(t)
	sb := create(t, ctx, c, client.CreateOptions{})

	cmd := exec.CommandContext(ctx, filepath.Join(d.Bin, "forkbox"), "sandbox", "logs", sb.SandboxID, "-f")
	cmd.Env = append(cmd.Environ(), "FORKBOX_API_URL="+d.URL, "FORKBOX_API_KEY="+d.APIKey)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 100)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	// expect reads printed lines until one holds every one of subs.
	expect := func(what string, subs ...string) {
		t.Helper()
		deadline := time.After(20 * time.Second)
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("%s: `logs -f` ended: %s", what, stderr.String())
				}
				if countContaining([]string{l}, subs...) == 1 {
					return
				}
			case <-deadline:
				t.Fatalf("%s: no line with %q within 20 s", what, subs)
			}
		}
	}
	expect("the log so far", "INFO", "sandbox created", "template=base")
	exitWith(t, ctx, sb.Conn(), 7)
	expect("a command's exit", "WARN", "process exited", "exitCode=7")
	if err := c.Pause(ctx, sb.SandboxID); err != nil {
		t.Fatal(err)
	}
	expect("the pause", "sandbox paused")
	if _, err := c.Connect(ctx, sb.SandboxID, time.Minute); err != nil {
		t.Fatal(err)
	}
	expect("the resume", "sandbox resumed")
	if err := c.KillSandbox(ctx, sb.SandboxID); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		for range lines {
		}
		done <- cmd.Wait()
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("`logs -f` after the kill: %v: %s", err, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Errorf("`logs -f` still running 10 s after the sandbox was killed")
	}
}
