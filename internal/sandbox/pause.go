package sandbox

import (
	"context"
	"fmt"

	"github.com/forkbox/forkbox/internal/cleanup"
	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/images"
	"github.com/forkbox/forkbox/internal/runtime"
)

// Pause starts persisting a running sandbox (memory and files) to disk and
// returns at once: the sandbox reports paused from now on, data-plane calls
// get ErrConflict until it completes, and Connect waits for it. Pausing a
// sandbox that is not running (paused, being paused, still being created,
// busy) is ErrConflict.
func (m *Manager) Pause(ctx context.Context, id string) error {
	if _, err := m.checkpointer(); err != nil {
		return err
	}
	o, err := m.claimPause(ctx, id)
	if err != nil {
		return err
	}
	m.goBackground(func() { m.finishPauseObserved(context.WithoutCancel(ctx), o, OpPause) })
	return nil
}

// claimPause claims running sandbox id for a pause of either kind, with
// the conflicts a pause answers: already paused (or being paused), or busy
// with something else.
func (m *Manager) claimPause(ctx context.Context, id string) (*op, error) {
	o, prev, err := m.tryClaim(ctx, id, StatePausing, StateRunning)
	switch {
	case errdefs.IsConflict(err) && prev.Public() == PublicPaused:
		return nil, fmt.Errorf("sandbox %s is already paused: %w", id, errdefs.ErrConflict)
	case errdefs.IsConflict(err):
		return nil, fmt.Errorf("sandbox %s is %s and cannot be paused now: %w", id, prev, errdefs.ErrConflict)
	case err != nil:
		return nil, err
	}
	return o, nil
}

// finishPause checkpoints the sandbox, releases its runtime side and marks
// it paused. If the checkpoint fails the sandbox is left running (or, if it
// stopped running, killed). It returns why the sandbox did not end paused.
func (m *Manager) finishPause(ctx context.Context, o *op) error {
	id := o.id()
	start := m.now()
	ref := images.Pause(id)
	o.undo.Add("remove pause image", func(ctx context.Context) error { return m.img.Remove(ctx, ref) })
	dir, err := m.checkpointImage(ctx, id, ref, false, func(dir string) { m.reviveUnkept(ctx, o, dir) })
	if err != nil {
		m.log.Error("pause failed; sandbox stays running", "sandbox", id, "err", err)
		if info, ierr := m.rt.Info(ctx, id); ierr == nil && info.State == runtime.StateRunning {
			o.fail(ctx, err, StateRunning, nil)
			return err
		}
		m.destroy(ctx, o)
		return err
	}
	if err := m.rt.Delete(ctx, id); err != nil && !errdefs.IsNotFound(err) {
		m.log.Error("release paused sandbox", "sandbox", id, "err", err)
	}
	if err := o.done(ctx, StatePaused, func(e *entry) { e.rec.ImageDir = dir }); err != nil {
		return err
	}
	m.log.Info("sandbox paused", "sandbox", id, "took", m.now().Sub(start))
	return nil
}

// reviveUnkept starts sandbox o again from the image its pause wrote but
// the image store did not keep (an upload to an object store that went
// away): the checkpoint stopped it, and without this the failed pause
// would lose it. On success finishPause finds it running and leaves it so.
func (m *Manager) reviveUnkept(ctx context.Context, o *op, dir string) {
	// The stopped container goes first, as after a pause; the restore
	// makes it anew.
	if err := m.rt.Delete(ctx, o.id()); err != nil && !errdefs.IsNotFound(err) {
		m.log.Error("release a sandbox whose pause image was not kept", "sandbox", o.id(), "err", err)
		return
	}
	undo := cleanup.New(m.log)
	if err := m.restore(ctx, undo, o.e.rec, dir, o.e.rec.EnvdAccessToken); err != nil {
		undo.Run(context.WithoutCancel(ctx))
		m.log.Error("restart a sandbox whose pause image was not kept", "sandbox", o.id(), "err", err)
		return
	}
	m.log.Warn("pause image not kept; the sandbox runs on from it", "sandbox", o.id())
}
