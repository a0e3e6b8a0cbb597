package fake

import (
	"context"
	"fmt"
	"time"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/runtime"
)

var _ runtime.Waiter = (*Runtime)(nil)

// KillWith stops sandbox id as if its supervisor had ended for reason (a
// limit hit, a crash, a kill): the sandbox reports StateStopped until
// Delete, and Wait reports reason.
func (r *Runtime) KillWith(id string, reason runtime.ExitReason) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	sb, err := r.getLocked(id)
	if err != nil {
		return err
	}
	if sb.state != runtime.StateStopped {
		sb.exit = runtime.Exit{Reason: reason, Detail: "fake: " + string(reason), At: time.Now()}
	}
	sb.stop()
	return nil
}

// Wait implements runtime.Waiter.
func (r *Runtime) Wait(ctx context.Context, id string) (runtime.Exit, error) {
	r.mu.Lock()
	sb, err := r.getLocked(id)
	if err == nil && sb.state == runtime.StateStopped {
		err = fmt.Errorf("sandbox %s is stopped: %w", id, errdefs.ErrConflict)
	}
	if err == nil {
		sb.waiters++
	}
	r.mu.Unlock()
	if err != nil {
		return runtime.Exit{}, err
	}
	defer func() {
		r.mu.Lock()
		sb.waiters--
		r.mu.Unlock()
	}()
	select {
	case <-sb.exited:
		r.mu.Lock()
		defer r.mu.Unlock()
		return sb.exit, nil
	case <-ctx.Done():
		return runtime.Exit{}, ctx.Err()
	}
}

// Stopped implements runtime.Waiter.
func (r *Runtime) Stopped(ctx context.Context, id string) (runtime.Exit, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	sb, err := r.getLocked(id)
	switch {
	case err != nil:
		return runtime.Exit{}, err
	case sb.state != runtime.StateStopped:
		return runtime.Exit{}, fmt.Errorf("sandbox %s is %s: %w", id, sb.state, errdefs.ErrConflict)
	case sb.exit.Reason == "":
		return runtime.Exit{Reason: runtime.ExitKilled, At: time.Now(), Detail: "fake: stopped"}, nil
	}
	return sb.exit, nil
}

// Waiting reports whether a Wait on sandbox id is in progress. A test that
// kills a sandbox to see its death reported with the reason waits for it
// first: like runsc's, the fake's Wait on a sandbox that already stopped
// cannot say why.
func (r *Runtime) Waiting(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	sb, err := r.getLocked(id)
	return err == nil && sb.waiters > 0
}
