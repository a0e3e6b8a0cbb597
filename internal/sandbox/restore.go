package sandbox

import (
	"context"
	"fmt"

	"github.com/forkbox/forkbox/internal/cleanup"
	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/images"
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

// checkpointImage writes sandbox id's state as image ref and returns the
// image's directory. On failure no image of ref is left but a previous one.
// When the image was written but the store would not keep it (an object
// store that is down), revive, if set, gets the written directory before it
// goes, to start the sandbox again from it.
func (m *Manager) checkpointImage(ctx context.Context, id string, ref images.Ref, leaveRunning bool, revive func(dir string)) (string, error) {
	cp, err := m.checkpointer()
	if err != nil {
		return "", err
	}
	dir, err := m.img.Create(ctx, ref)
	if err != nil {
		return "", err
	}
	// The file list first: a stopped sandbox has none to give.
	upper, drop, uerr := m.tempUpperLayer(ctx, id)
	if uerr != nil {
		m.log.Warn("image kept without a file list: diffs of it will fail", "image", ref.String(), "err", uerr)
	} else {
		defer drop()
	}
	if err := cp.Checkpoint(ctx, id, dir, runtime.CheckpointOptions{LeaveRunning: leaveRunning}); err != nil {
		m.img.Abort(context.WithoutCancel(ctx), ref)
		return "", err
	}
	if uerr == nil {
		if err := keepUpperLayer(upper, dir); err != nil {
			m.log.Warn("image kept without a file list: diffs of it will fail", "image", ref.String(), "err", err)
		}
	}
	if err := m.img.Commit(ctx, ref); err != nil {
		if revive != nil {
			revive(dir)
		}
		m.img.Abort(context.WithoutCancel(ctx), ref)
		return "", err
	}
	return m.img.Open(ctx, ref)
}

// restore starts sandbox rec from an image and re-initialises its agent
// (new env, token and a reseed: a restored image duplicates PRNG state);
// imageToken is the access token the image's agent holds. The restored
// sandbox's removal is pushed on undo, so the caller's failure removes it.
func (m *Manager) restore(ctx context.Context, undo *cleanup.Stack, rec store.Sandbox, imageDir, imageToken string) error {
	if isFilesystemImage(imageDir) {
		return m.bootFromFilesystem(ctx, undo, rec, imageDir)
	}
	cp, err := m.checkpointer()
	if err != nil {
		return err
	}
	spec, err := m.spec(ctx, &rec)
	if err != nil {
		return err
	}
	if _, err := cp.Restore(ctx, spec, imageDir); err != nil {
		return err
	}
	undo.Add("delete restored sandbox", func(ctx context.Context) error { return m.rt.Delete(ctx, rec.ID) })
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
