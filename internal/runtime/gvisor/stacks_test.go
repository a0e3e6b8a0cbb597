package gvisor

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/runtime"
	"github.com/forkbox/forkbox/internal/runtime/runtimetest"
	"github.com/forkbox/forkbox/internal/syncbuf"
)

// TestCheckpointTimeoutLogsStacks: a checkpoint that runs out of time
// answers unavailable and leaves the sentry's goroutine stacks in the log,
// so a rare hang can be diagnosed from the run it happened in.
func TestCheckpointTimeoutLogsStacks(t *testing.T) {
	setup(t)
	var logs syncbuf.Buffer
	r, err := New(context.Background(), Config{
		RunscPath: env.runsc, StateDir: env.state, Net: env.net, CgroupParent: testCgroupParent,
		Logger: slog.New(slog.NewTextHandler(&logs, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(context.Background()); checkNoStray(t, r) })
	spec := testSpec(runtimetest.NewID(), false)
	startSandbox(t, r, spec)
	r.cfg.Timeout = time.Millisecond // only the checkpoint below runs with it
	err = r.Checkpoint(context.Background(), spec.ID, t.TempDir(), runtime.CheckpointOptions{LeaveRunning: true})
	r.cfg.Timeout = time.Minute
	if !errors.Is(err, errdefs.ErrUnavailable) {
		t.Fatalf("a checkpoint out of time: %v, want unavailable", err)
	}
	out := logs.String()
	if !strings.Contains(out, "checkpoint timed out: the sentry's stacks") || !strings.Contains(out, "goroutine") {
		t.Errorf("no stacks logged after the checkpoint's timeout:\n%.2000s", out)
	}
}
