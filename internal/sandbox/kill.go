package sandbox

import (
	"time"

	"context"
	"errors"
	"fmt"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/images"
)

// Kill destroys a sandbox and everything it holds. Killing a sandbox that an
// operation holds waits for that operation to finish first, so a kill racing
// an eviction gets a clean answer: the sandbox is gone either way, and a
// second kill of the same sandbox reports ErrNotFound.
func (m *Manager) Kill(ctx context.Context, id string) (err error) {
	defer func(start time.Time) { m.observe(OpKill, start, err) }(m.now())
	for {
		o, err := m.claim(ctx, id, StateKilling, StateRunning, StatePaused)
		if err == nil {
			return m.destroy(ctx, o)
		}
		if !errors.Is(err, errdefs.ErrConflict) {
			return err
		}
		if err := m.waitIdle(ctx, id); err != nil {
			return err
		}
	}
}

// destroy ends o by killing its sandbox: o's pending undo steps run, then
// the runtime side and the pause image go. The runtime work must not be cut
// short by the caller's context: a half-deleted sandbox would leak.
func (m *Manager) destroy(ctx context.Context, o *op) error {
	ctx = context.WithoutCancel(ctx)
	o.undo.Run(ctx)
	id := o.id()
	if err := m.rt.Delete(ctx, id); err != nil && !errdefs.IsNotFound(err) {
		m.log.Error("delete sandbox", "sandbox", id, "err", err)
		return errors.Join(fmt.Errorf("kill %s: %w", id, err), o.done(ctx, StateKilled, recordError(err)))
	}
	if err := m.img.Remove(ctx, images.Pause(id)); err != nil {
		m.log.Error("remove pause image", "sandbox", id, "err", err)
	}
	err := o.done(ctx, StateKilled, func(e *entry) { e.rec.ImageDir = "" })
	m.log.Info("sandbox killed", "sandbox", id)
	// A sandbox that died on its own keeps its log: it says why (Logs).
	if o.e.rec.KillReason == "" {
		if err := m.cfg.Events.Remove(id); err != nil {
			m.log.Error("remove event log", "id", id, "err", err)
		}
	}
	// The sandbox may have been the last user of a clone's snapshot.
	m.collectSnapshot(ctx, o.e.rec.TemplateID)
	return err
}
