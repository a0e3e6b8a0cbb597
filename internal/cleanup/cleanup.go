// Package cleanup is forkbox's one undo idiom: a LIFO stack of undo steps
// for a multi-step operation. Each step that changes the host (or a record)
// pushes its inverse; if the operation fails the steps run newest first, so
// what the operation made is gone and what it changed is back as it was.
package cleanup

import (
	"context"
	"log/slog"
)

// Stack holds the undo steps of one operation. The zero value is ready to
// use (it logs to slog.Default). A Stack is not safe for concurrent use: it
// belongs to the goroutine running the operation.
type Stack struct {
	// Log receives the failures of undo steps; nil means slog.Default().
	Log   *slog.Logger
	steps []step
}

type step struct {
	name string
	fn   func(context.Context) error
}

// New returns an empty Stack logging to log.
func New(log *slog.Logger) *Stack { return &Stack{Log: log} }

// Add pushes an undo step; name identifies it in the log.
func (s *Stack) Add(name string, fn func(context.Context) error) {
	s.steps = append(s.steps, step{name, fn})
}

// Len reports how many undo steps are armed.
func (s *Stack) Len() int { return len(s.steps) }

// Run undoes every step, newest first, and empties the stack. It ignores
// ctx's cancellation (the operation failed, possibly because ctx ended, but
// the undo must still happen) and logs failures rather than returning them:
// the operation's own error is what its caller reports.
func (s *Stack) Run(ctx context.Context) {
	ctx = context.WithoutCancel(ctx)
	log := s.Log
	if log == nil {
		log = slog.Default()
	}
	for i := len(s.steps) - 1; i >= 0; i-- {
		st := s.steps[i]
		if err := st.fn(ctx); err != nil {
			log.WarnContext(ctx, "cleanup step failed", "step", st.name, "err", err)
		}
	}
	s.steps = nil
}

// Disarm drops the steps after success: nothing is undone.
func (s *Stack) Disarm() { s.steps = nil }

// OnError runs the stack when *errp holds an error and disarms it
// otherwise; defer it right after creating the stack:
//
//	var undo cleanup.Stack
//	defer undo.OnError(ctx, &err)
func (s *Stack) OnError(ctx context.Context, errp *error) {
	if *errp != nil {
		s.Run(ctx)
		return
	}
	s.Disarm()
}
