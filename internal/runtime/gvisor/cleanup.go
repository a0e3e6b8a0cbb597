package gvisor

import (
	"context"
	"log/slog"
)

// cleanup is a LIFO stack of undo steps for a multi-step operation: each
// step that changes the host pushes its inverse, and a failure runs them
// newest first so the host is left as it was.
type cleanup struct {
	log   *slog.Logger
	steps []cleanupStep
}

type cleanupStep struct {
	name string
	fn   func(context.Context) error
}

// add pushes an undo step.
func (c *cleanup) add(name string, fn func(context.Context) error) {
	c.steps = append(c.steps, cleanupStep{name, fn})
}

// run undoes every step, newest first. It ignores ctx's cancellation (the
// operation failed, possibly because ctx ended, but the undo must still
// happen) and logs failures: the original error is what the caller reports.
func (c *cleanup) run(ctx context.Context) {
	ctx = context.WithoutCancel(ctx)
	for i := len(c.steps) - 1; i >= 0; i-- {
		s := c.steps[i]
		if err := s.fn(ctx); err != nil {
			c.log.WarnContext(ctx, "cleanup step failed", "step", s.name, "err", err)
		}
	}
	c.steps = nil
}

// disarm drops the steps after success.
func (c *cleanup) disarm() { c.steps = nil }
