package sandbox

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/forkbox/forkbox/internal/errdefs"
)

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
