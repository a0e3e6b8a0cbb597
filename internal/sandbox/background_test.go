package sandbox

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/forkbox/forkbox/internal/runtime"
)

// TestWaitBackgroundWaitsForPause: a pause answered at once is tracked
// until its checkpoint ends, so a stopping daemon can wait for it instead
// of leaving the sandbox half-paused.
func TestWaitBackgroundWaitsForPause(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	sb := e.create(t, CreateRequest{})
	release := make(chan struct{})
	e.rt.FailCheckpoint = func(string, runtime.CheckpointOptions) error { <-release; return nil }
	if err := e.m.Pause(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	if n := e.m.InBackground(); n != 1 {
		t.Errorf("InBackground = %d during a pause, want 1", n)
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := e.m.WaitBackground(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("WaitBackground with the checkpoint held = %v, want the deadline", err)
	}
	close(release)
	if err := e.m.WaitBackground(ctx); err != nil {
		t.Fatal(err)
	}
	if n := e.m.InBackground(); n != 0 {
		t.Errorf("InBackground = %d after the pause, want 0", n)
	}
	e.m.mu.Lock()
	got := e.m.boxes[sb.ID].state
	e.m.mu.Unlock()
	if got != StatePaused {
		t.Errorf("state once WaitBackground returned = %s, want paused", got)
	}
}
