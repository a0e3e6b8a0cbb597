package sandbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/images"
)

// Connect makes sure a sandbox is running and returns it: a running one has
// its deadline extended to now+timeout (never shortened); a paused one — or
// one being paused, once that finishes — is resumed with a fresh deadline.
// resumed reports which happened. A sandbox still being created is
// ErrConflict, as on the data plane.
func (m *Manager) Connect(ctx context.Context, id string, timeout time.Duration) (sb *Sandbox, resumed bool, err error) {
	return m.connect(ctx, id, timeout, nil)
}

// ConnectReboot is Connect for a client that wants a fresh boot
// (connect({onResume: 'reboot'}), wire memory: false): a paused sandbox is
// resumed by cold-booting its files, whatever kind of pause it had; a
// running one is only extended.
func (m *Manager) ConnectReboot(ctx context.Context, id string, timeout time.Duration) (*Sandbox, bool, error) {
	return m.connect(ctx, id, timeout, m.dropMemory)
}

// connect is Connect with beforeResume, when set, run on a paused sandbox
// claimed for its resume, before the resume: its failure leaves the
// sandbox paused and is the connect's error.
func (m *Manager) connect(ctx context.Context, id string, timeout time.Duration, beforeResume func(context.Context, *op) error) (*Sandbox, bool, error) {
	ttl, err := m.ttl(timeout)
	if err != nil {
		return nil, false, err
	}
	for {
		sb, err := m.extend(ctx, id, ttl, StateRunning, StateSnapshotting)
		if err == nil {
			return sb, false, nil
		}
		if !errors.Is(err, errdefs.ErrConflict) {
			return nil, false, err
		}
		o, prev, cerr := m.tryClaim(ctx, id, StateResuming, StatePaused)
		if cerr == nil {
			sb, err := m.resumeClaimed(ctx, o, ttl, beforeResume)
			return sb, err == nil, err
		}
		if !errors.Is(cerr, errdefs.ErrConflict) {
			return nil, false, cerr
		}
		if prev == StateCreating {
			return nil, false, fmt.Errorf("sandbox %s is still being created: %w", id, errdefs.ErrConflict)
		}
		if err := m.waitIdle(ctx, id); err != nil {
			return nil, false, err
		}
	}
}

// resumeClaimed runs beforeResume (if any) and then resumes the paused
// sandbox claimed by o.
func (m *Manager) resumeClaimed(ctx context.Context, o *op, ttl time.Duration, beforeResume func(context.Context, *op) error) (*Sandbox, error) {
	if beforeResume != nil {
		if err := beforeResume(ctx, o); err != nil {
			return nil, o.fail(ctx, fmt.Errorf("prepare the resume of %s: %w", o.id(), err), StatePaused, nil)
		}
	}
	return m.resume(ctx, o, ttl)
}

// Resume is the deprecated resume call: a paused sandbox (or one being
// paused) is resumed as by Connect; a running one is ErrConflict, as E2B
// answers it.
func (m *Manager) Resume(ctx context.Context, id string, timeout time.Duration) (*Sandbox, error) {
	m.mu.Lock()
	e, err := m.lookupLocked(id)
	running := err == nil && e.state.Public() == PublicRunning
	m.mu.Unlock()
	switch {
	case err != nil:
		return nil, err
	case running:
		return nil, fmt.Errorf("sandbox %s is already running: %w", id, errdefs.ErrConflict)
	}
	sb, _, err := m.Connect(ctx, id, timeout)
	return sb, err
}

// resume restores a paused sandbox claimed by o from its image; on failure
// it stays paused with its image.
func (m *Manager) resume(ctx context.Context, o *op, ttl time.Duration) (_ *Sandbox, err error) {
	defer func(start time.Time) { m.observe(OpResume, start, err) }(m.now())
	ctx = context.WithoutCancel(ctx)
	rec := o.e.rec
	ref := images.Pause(rec.ID)
	dir, err := m.img.Open(ctx, ref)
	if err == nil {
		err = m.restore(ctx, &o.undo, rec, dir, rec.EnvdAccessToken)
	}
	if err != nil {
		return nil, o.fail(ctx, fmt.Errorf("resume %s: %w", rec.ID, err), StatePaused, nil)
	}
	m.img.Remove(ctx, ref)
	if err := o.done(ctx, StateRunning, func(e *entry) {
		e.rec.ImageDir = ""
		e.rec.EndAt = m.now().Add(ttl)
		e.gen++
	}); err != nil {
		return nil, err
	}
	m.log.Info("sandbox resumed", "sandbox", rec.ID)
	return m.Get(ctx, rec.ID)
}
