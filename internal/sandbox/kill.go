package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/forkbox/forkbox/internal/errdefs"
)

// Kill destroys a sandbox and everything it holds. Killing a sandbox that an
// operation holds waits for that operation to finish first, so a kill racing
// an eviction gets a clean answer: the sandbox is gone either way, and a
// second kill of the same sandbox reports ErrNotFound.
func (m *Manager) Kill(ctx context.Context, id string) error {
	for {
		e, _, err := m.claim(ctx, id, StateKilling, StateRunning, StatePaused)
		if err == nil {
			return m.destroy(ctx, e)
		}
		if !errors.Is(err, errdefs.ErrConflict) {
			return err
		}
		if err := m.waitIdle(ctx, id); err != nil {
			return err
		}
	}
}

// waitIdle blocks until the operation holding id's claim ends.
func (m *Manager) waitIdle(ctx context.Context, id string) error {
	m.mu.Lock()
	e, err := m.lookupLocked(id)
	var done chan struct{}
	if err == nil {
		done = e.done
	}
	m.mu.Unlock()
	if err != nil {
		return err
	}
	if done == nil {
		return nil
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for sandbox %s: %w", id, ctx.Err())
	}
}

// destroy finishes a kill claimed by the caller. The runtime work must not
// be cut short by the caller's context: a half-deleted sandbox would leak.
func (m *Manager) destroy(ctx context.Context, e *entry) error {
	ctx = context.WithoutCancel(ctx)
	id := e.rec.ID
	if err := m.rt.Delete(ctx, id); err != nil && !errdefs.IsNotFound(err) {
		m.log.Error("delete sandbox", "sandbox", id, "err", err)
		m.release(ctx, e, StateKilled, func(e *entry) { e.rec.Error = err.Error() })
		return fmt.Errorf("kill %s: %w", id, err)
	}
	if e.rec.ImageDir != "" {
		os.RemoveAll(e.rec.ImageDir)
	}
	m.release(ctx, e, StateKilled, func(e *entry) { e.rec.ImageDir = "" })
	m.log.Info("sandbox killed", "sandbox", id)
	if err := m.cfg.Events.Remove(id); err != nil {
		m.log.Error("remove event log", "id", id, "err", err)
	}
	// The sandbox may have been the last user of a clone's snapshot.
	m.collectSnapshot(ctx, e.rec.TemplateID)
	return nil
}

// SetTimeout replaces the sandbox's deadline with now+d; it may shorten it.
func (m *Manager) SetTimeout(ctx context.Context, id string, d time.Duration) (*Sandbox, error) {
	if d <= 0 {
		return nil, fmt.Errorf("timeout must be positive: %w", errdefs.ErrInvalidArgument)
	}
	if _, err := m.ttl(d); err != nil {
		return nil, err
	}
	return m.update(ctx, id, func(e *entry) error {
		e.rec.EndAt = m.now().Add(d)
		return nil
	})
}

// Refresh extends the deadline to now+d unless it is already later: a
// refresh never shortens a sandbox's life.
func (m *Manager) Refresh(ctx context.Context, id string, d time.Duration) (*Sandbox, error) {
	if d < 0 || d > time.Hour {
		return nil, fmt.Errorf("duration must be between 0 and 3600 s: %w", errdefs.ErrInvalidArgument)
	}
	if d == 0 {
		d = m.cfg.DefaultTimeout
	}
	return m.extend(ctx, id, d)
}

// extend moves the deadline to now+d unless it is later already. With
// onlyIn given, a sandbox in another state is ErrConflict and unchanged.
func (m *Manager) extend(ctx context.Context, id string, d time.Duration, onlyIn ...State) (*Sandbox, error) {
	return m.update(ctx, id, func(e *entry) error {
		if len(onlyIn) > 0 && !slices.Contains(onlyIn, e.state) {
			return fmt.Errorf("sandbox %s is %s: %w", id, e.state, errdefs.ErrConflict)
		}
		if end := m.now().Add(d); end.After(e.rec.EndAt) {
			e.rec.EndAt = end
		}
		return nil
	})
}
