package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/runtime"
	"github.com/forkbox/forkbox/internal/store"
)

// checkpointer returns the runtime's checkpoint ability, or an error saying
// this backend cannot persist memory.
func (m *Manager) checkpointer() (runtime.Checkpointer, error) {
	cp, ok := m.rt.(runtime.Checkpointer)
	if !ok {
		return nil, fmt.Errorf("runtime %s cannot checkpoint: %w", m.rt.Name(), errdefs.ErrUnavailable)
	}
	return cp, nil
}

func (m *Manager) pauseDir(id string) string {
	return filepath.Join(m.cfg.ImageDir, "paused", id)
}

// Pause starts persisting a running sandbox (memory and files) to disk and
// returns at once: the sandbox reports paused from now on, data-plane calls
// get ErrConflict until it completes, and Connect waits for it. Pausing a
// paused sandbox is ErrConflict.
func (m *Manager) Pause(ctx context.Context, id string) error {
	if _, err := m.checkpointer(); err != nil {
		return err
	}
	e, _, err := m.claim(ctx, id, StatePausing, StateRunning)
	if err != nil {
		return err
	}
	go m.finishPause(context.WithoutCancel(ctx), e)
	return nil
}

// finishPause checkpoints the sandbox, releases its runtime side and marks
// it paused. If the checkpoint fails the sandbox is left running.
func (m *Manager) finishPause(ctx context.Context, e *entry) {
	id := e.rec.ID
	start := m.now()
	dir := m.pauseDir(id)
	if err := m.checkpointTo(ctx, id, dir, false); err != nil {
		m.log.Error("pause failed; sandbox stays running", "sandbox", id, "err", err)
		os.RemoveAll(dir)
		if info, ierr := m.rt.Info(ctx, id); ierr == nil && info.State == runtime.StateRunning {
			m.release(ctx, e, StateRunning, nil)
			return
		}
		m.destroy(ctx, e)
		return
	}
	if err := m.rt.Delete(ctx, id); err != nil && !errdefs.IsNotFound(err) {
		m.log.Error("release paused sandbox", "sandbox", id, "err", err)
	}
	m.release(ctx, e, StatePaused, func(e *entry) { e.rec.ImageDir = dir })
	m.log.Info("sandbox paused", "sandbox", id, "took", m.now().Sub(start))
}

// checkpointTo writes id's state into a fresh directory dir.
func (m *Manager) checkpointTo(ctx context.Context, id, dir string, leaveRunning bool) error {
	cp, err := m.checkpointer()
	if err != nil {
		return err
	}
	os.RemoveAll(dir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("image dir: %w", err)
	}
	return cp.Checkpoint(ctx, id, dir, runtime.CheckpointOptions{LeaveRunning: leaveRunning})
}

// Connect makes sure a sandbox is running and returns it: a running one has
// its deadline extended to now+timeout (never shortened); a paused one — or
// one being paused, once that finishes — is resumed with a fresh deadline.
// resumed reports which happened.
func (m *Manager) Connect(ctx context.Context, id string, timeout time.Duration) (sb *Sandbox, resumed bool, err error) {
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
		e, _, cerr := m.claim(ctx, id, StateResuming, StatePaused)
		if cerr == nil {
			sb, err := m.resume(ctx, e, ttl)
			return sb, err == nil, err
		}
		if !errors.Is(cerr, errdefs.ErrConflict) {
			return nil, false, cerr
		}
		if err := m.waitIdle(ctx, id); err != nil {
			return nil, false, err
		}
	}
}

// resume restores a paused sandbox claimed by the caller from its image.
func (m *Manager) resume(ctx context.Context, e *entry, ttl time.Duration) (*Sandbox, error) {
	ctx = context.WithoutCancel(ctx)
	rec := e.rec
	if err := m.restore(ctx, rec, rec.ImageDir, rec.EnvdAccessToken); err != nil {
		m.release(ctx, e, StatePaused, nil)
		return nil, fmt.Errorf("resume %s: %w", rec.ID, err)
	}
	os.RemoveAll(rec.ImageDir)
	m.release(ctx, e, StateRunning, func(e *entry) {
		e.rec.ImageDir = ""
		e.rec.EndAt = m.now().Add(ttl)
		e.gen++
	})
	m.log.Info("sandbox resumed", "sandbox", rec.ID)
	return m.Get(ctx, rec.ID)
}

// restore starts sandbox rec from an image and re-initialises its agent
// (new env, token and a reseed: a restored image duplicates PRNG state);
// imageToken is the access token the image's agent holds. On failure nothing
// of the runtime side is left.
func (m *Manager) restore(ctx context.Context, rec store.Sandbox, imageDir, imageToken string) (err error) {
	cp, err := m.checkpointer()
	if err != nil {
		return err
	}
	spec := m.spec(&rec)
	if _, err := cp.Restore(ctx, spec, imageDir); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			m.rt.Delete(context.WithoutCancel(ctx), rec.ID)
		}
	}()
	return m.initAgent(ctx, &rec, imageToken)
}

// imageToken returns the access token held by the agent inside a snapshot's
// image: its source sandbox's, which never changes after creation.
func (m *Manager) imageToken(ctx context.Context, snap *store.Template) string {
	src, err := m.st.GetSandbox(ctx, snap.SourceSandboxID)
	if err != nil {
		return ""
	}
	return src.EnvdAccessToken
}
