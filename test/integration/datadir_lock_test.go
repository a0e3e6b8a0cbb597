package integration

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/forkbox/forkbox/client"
	"github.com/forkbox/forkbox/internal/daemon/daemonproc"
	"github.com/forkbox/forkbox/internal/daemon/daemontest"
	"github.com/forkbox/forkbox/internal/runtime/gvisor"
)

// TestSecondDaemonOnDataDirExits starts a second `forkbox serve` on a live
// daemon's data dir (on a port of its own): it exits non-zero naming the
// first daemon's pid, and removes nothing — the first daemon's sandbox,
// standby containers and pool sandboxes all keep their runsc processes, and
// the first daemon keeps serving creates and commands.
func TestSecondDaemonOnDataDirExits(t *testing.T) {
	ctx := daemontest.Context(t)
	d := daemontest.Start(t, daemontest.Options{ExtraArgs: []string{"--pool-size", "1", "--standby", "1"}})
	c := client.New(d.URL, d.APIKey)
	sb, err := c.CreateSandbox(ctx, client.CreateOptions{TemplateID: "base"})
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(d.DataDir, "runtime", "runsc")
	before := settledContainers(t, ctx, d, root)

	addr, err := daemonproc.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	argv := append(d.Cmdline(), "--listen", addr)
	rctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	var out bytes.Buffer
	rival := exec.CommandContext(rctx, argv[0], argv[1:]...)
	rival.Stdout, rival.Stderr = &out, &out
	err = rival.Run()
	if err == nil || rival.ProcessState.ExitCode() <= 0 {
		t.Fatalf("second daemon on %s: exit %v, want non-zero:\n%s", d.DataDir, err, out.String())
	}
	want := fmt.Sprintf("data dir %s is in use by pid %d", d.DataDir, d.Pid())
	if !strings.Contains(out.String(), want) {
		t.Fatalf("second daemon's output lacks %q:\n%s", want, out.String())
	}

	after := gvisor.RunscProcesses(root)
	if b, a := containers(before), containers(after); !slices.Equal(b, a) {
		t.Fatalf("runsc containers changed by the second daemon: before %v, after %v", b, a)
	}
	if got := sh(t, ctx, sb.Conn(), "echo alive"); got != "alive" {
		t.Fatalf("first daemon's sandbox answers %q", got)
	}
	sb2, err := c.CreateSandbox(ctx, client.CreateOptions{TemplateID: "base"})
	if err != nil {
		t.Fatalf("first daemon after the second one's attempt: %v\n%s", err, d.Log())
	}
	if got := sh(t, ctx, sb2.Conn(), "echo new"); got != "new" {
		t.Fatalf("new sandbox answers %q", got)
	}
}

// containers lists the runsc containers of a process scan, sorted.
func containers(procs map[int]gvisor.RunscProcess) []string {
	set := map[string]bool{}
	for _, p := range procs {
		set[p.Container] = true
	}
	return slices.Sorted(maps.Keys(set))
}

// settledContainers waits until the daemon's pool (one sandbox per built-in
// template) and standby are full, as its own metrics say, and its runsc
// containers have stayed the same for two seconds: the pool and standby
// fill in the background (a create takes a pooled sandbox and starts a
// refill), so a count alone can be met before they finish.
func settledContainers(t *testing.T, ctx context.Context, d *daemontest.Daemon, root string) map[int]gvisor.RunscProcess {
	t.Helper()
	var last []string
	var procs map[int]gvisor.RunscProcess
	stableSince := time.Now()
	waitFor(t, 120*time.Second, func() bool {
		procs = gvisor.RunscProcesses(root)
		now := containers(procs)
		if !slices.Equal(now, last) {
			last, stableSince = now, time.Now()
			return false
		}
		_, text := scrape(t, ctx, d.URL, d.APIKey)
		full := metric(text, `forkbox_pool_sandboxes{template="base"}`) >= 1 &&
			metric(text, `forkbox_pool_sandboxes{template="code-interpreter-v1"}`) >= 1 &&
			metric(text, "forkbox_standby_containers") >= metric(text, "forkbox_standby_target")
		return full && time.Since(stableSince) >= 2*time.Second
	})
	return procs
}
