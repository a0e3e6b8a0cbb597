package sandbox

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/forkbox/forkbox/internal/cleanup"
	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/images"
	"github.com/forkbox/forkbox/internal/runtime"
	"github.com/forkbox/forkbox/internal/store"
)

// A filesystem-only pause (E2B's pause {memory: false}, onTimeout
// keepMemory: false) keeps only the files the sandbox wrote — the runtime's
// FilesystemSaver — and resuming it cold-boots the template with them: a
// new boot, files kept, processes gone. Such an image is marked by
// filesystemMarker, so everything that starts a sandbox from an image
// (resume, clone and fork copies, create from a snapshot of it, rollback of
// a paused sandbox) boots it the right way through restore.

// filesystemMarker marks an image directory holding only a filesystem.
const filesystemMarker = "forkbox-filesystem-only"

// isFilesystemImage reports whether dir holds a filesystem-only image.
func isFilesystemImage(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, filesystemMarker))
	return err == nil
}

// filesystemSaver returns the runtime's FilesystemSaver.
func (m *Manager) filesystemSaver() (runtime.FilesystemSaver, error) {
	fs, ok := m.rt.(runtime.FilesystemSaver)
	if !ok {
		return nil, fmt.Errorf("runtime %s cannot save a filesystem alone: %w", m.rt.Name(), errdefs.ErrInvalidArgument)
	}
	return fs, nil
}

// PauseFilesystem is Pause keeping only the sandbox's files: it returns at
// once, the sandbox reports paused, and Connect cold-boots it.
func (m *Manager) PauseFilesystem(ctx context.Context, id string) error {
	if _, err := m.filesystemSaver(); err != nil {
		return err
	}
	o, err := m.claimPause(ctx, id)
	if err != nil {
		return err
	}
	m.goBackground(func() {
		start := m.now()
		m.observe(OpPause, start, m.finishFilesystemPause(context.WithoutCancel(ctx), o))
	})
	return nil
}

// finishFilesystemPause saves the sandbox's files, releases its runtime
// side and marks it paused. If the save fails the sandbox is left running
// (or, if it cannot be thawed, killed).
func (m *Manager) finishFilesystemPause(ctx context.Context, o *op) error {
	id := o.id()
	start := m.now()
	ref := images.Pause(id)
	o.undo.Add("remove pause image", func(ctx context.Context) error { return m.img.Remove(ctx, ref) })
	m.collectAgentEvents(ctx, id, o.e.rec.EnvdAccessToken) // the agent will not come back
	dir, err := m.saveFilesystemImage(ctx, id, ref)
	if err != nil {
		m.log.Error("pause failed; sandbox stays running", "sandbox", id, "memory", false, "err", err)
		if terr := m.rt.Thaw(ctx, id); terr == nil {
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
	m.log.Info("sandbox paused", "sandbox", id, "memory", false, "took", m.now().Sub(start))
	return nil
}

// saveFilesystemImage writes id's files as image ref, the sandbox frozen
// meanwhile so the copy is consistent (it stays frozen), and returns the
// image's directory. On failure no image of ref is left but a previous one.
func (m *Manager) saveFilesystemImage(ctx context.Context, id string, ref images.Ref) (string, error) {
	fsr, err := m.filesystemSaver()
	if err != nil {
		return "", err
	}
	dir, err := m.img.Create(ctx, ref)
	if err != nil {
		return "", err
	}
	err = m.rt.Freeze(ctx, id)
	if err == nil {
		err = fsr.SaveFilesystem(ctx, id, dir)
	}
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, filesystemMarker), []byte("filesystem only: cold boot\n"), 0o600)
	}
	if w, werr := m.upperWriter(); err == nil && werr == nil {
		err = w.WriteUpperLayer(ctx, id, filepath.Join(dir, upperLayerFile))
	}
	if err == nil {
		err = m.img.Commit(ctx, ref)
	}
	if err != nil {
		m.img.Abort(context.WithoutCancel(ctx), ref)
		return "", err
	}
	return m.img.Open(ctx, ref)
}

// bootFromFilesystem cold-boots rec with the files saved in imageDir and
// initialises its (fresh) agent, pushing the sandbox's removal on undo.
func (m *Manager) bootFromFilesystem(ctx context.Context, undo *cleanup.Stack, rec store.Sandbox, imageDir string) error {
	fsr, err := m.filesystemSaver()
	if err != nil {
		return err
	}
	spec, err := m.spec(ctx, &rec)
	if err != nil {
		return err
	}
	if _, err := fsr.CreateFromFilesystem(ctx, spec, imageDir); err != nil {
		return fmt.Errorf("boot %s from its files: %w", rec.ID, err)
	}
	undo.Add("delete booted sandbox", func(ctx context.Context) error { return m.rt.Delete(ctx, rec.ID) })
	// A booted agent holds no token yet.
	return m.initAgent(ctx, &rec, "")
}

// dropMemory replaces the memory image of a paused sandbox claimed by o
// with a filesystem-only one: restore it, save its files, delete it.
func (m *Manager) dropMemory(ctx context.Context, o *op) error {
	ctx = context.WithoutCancel(ctx)
	rec := o.e.rec
	ref := images.Pause(rec.ID)
	dir, err := m.img.Open(ctx, ref)
	if err != nil || isFilesystemImage(dir) {
		return err
	}
	cp, err := m.checkpointer()
	if err != nil {
		return err
	}
	spec, err := m.spec(ctx, &rec)
	if err != nil {
		return err
	}
	if _, err := cp.Restore(ctx, spec, dir); err != nil {
		return err
	}
	dir, err = m.saveFilesystemImage(ctx, rec.ID, ref)
	if derr := m.rt.Delete(ctx, rec.ID); derr != nil && !errdefs.IsNotFound(derr) && err == nil {
		err = derr
	}
	if err != nil {
		return err
	}
	m.mu.Lock()
	o.e.rec.ImageDir = dir
	m.mu.Unlock()
	return nil
}

// observeAutoPause pauses an expired sandbox the way it was created to
// be (files only, or with memory), observed as op (the evictor's
// metrics), whichever kind of pause it is.
func (m *Manager) observeAutoPause(ctx context.Context, o *op, op Operation) {
	if !o.e.rec.AutoPauseFilesOnly {
		m.finishPauseObserved(ctx, o, op)
		return
	}
	start := m.now()
	m.observe(op, start, m.finishFilesystemPause(ctx, o))
}
