package integration

import (
	"context"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/forkbox/forkbox/client"
	"github.com/forkbox/forkbox/internal/runtime/gvisor"
)

// TestSIGTERMSaysWhatItLeaves stops the daemon as an operator does
// (SIGTERM): it logs "forkbox shutting down" and then the sandboxes it
// leaves — running ones keep running by design, paused ones stay on disk —
// and those are still there afterwards: the running sandbox's runsc
// processes live, and the next serve finds both.
func TestSIGTERMSaysWhatItLeaves(t *testing.T) {
	ctx := daemontestContext(t)
	d, c := start(t)
	running := create(t, ctx, c, client.CreateOptions{})
	paused := create(t, ctx, c, client.CreateOptions{})
	if err := c.Pause(ctx, paused.SandboxID); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, func() bool { return state(t, ctx, c, paused.SandboxID) == "paused" })
	cid := containerOf(t, d, running.SandboxID)
	before := len(d.Log())
	d.Terminate()
	log := d.Log()[before:]
	down := strings.Index(log, "forkbox shutting down")
	if down < 0 {
		t.Fatalf("no \"forkbox shutting down\" line after SIGTERM:\n%s", log)
	}
	left := regexp.MustCompile(`(?m)^.*forkbox stopped; sandboxes keep running.*$`).FindString(log[down:])
	for _, want := range []string{"running=1", "paused=1", "running_ids=[" + running.SandboxID + "]", "paused_ids=[" + paused.SandboxID + "]"} {
		if !strings.Contains(left, want) {
			t.Errorf("the line of what it left %q lacks %q; log:\n%s", left, want, log)
		}
	}
	var procs []string
	for _, p := range gvisor.RunscProcesses(filepath.Join(d.DataDir, "runtime", "runsc")) {
		if p.Container == cid {
			procs = append(procs, p.Argv0)
		}
	}
	if len(procs) == 0 {
		t.Errorf("the running sandbox's runsc processes are gone after SIGTERM")
	}
	d.Restart()
	c = client.New(d.URL, d.APIKey)
	for id, want := range map[string]string{running.SandboxID: "running", paused.SandboxID: "paused"} {
		if got := state(t, context.WithoutCancel(ctx), c, id); got != want {
			t.Errorf("after the restart %s is %s, want %s", id, got, want)
		}
	}
	if got := readFile(t, ctx, c.Conn(running.SandboxID, running.EnvdAccessToken), "/etc/hostname"); got == "" {
		t.Errorf("the running sandbox does not answer after the restart")
	}
}
