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
	// The pool and standby fill in the background: wait until they are made.
	var before map[int]gvisor.RunscProcess
	waitFor(t, 60*time.Second, func() bool {
		before = gvisor.RunscProcesses(root)
		return len(containers(before)) >= 3 // the sandbox, a pooled one, a standby one
	})

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
