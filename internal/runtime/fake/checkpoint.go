package fake

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/runtime"
)

// Checkpoint implements runtime.Checkpointer: it records the spec and a
// clone of the handler (if it is a Cloner) under imageDir, writes
// MarkerFile there and, without LeaveRunning, stops the sandbox.
func (r *Runtime) Checkpoint(ctx context.Context, id string, imageDir string, opts runtime.CheckpointOptions) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	sb, err := r.getLocked(id)
	if err != nil {
		return err
	}
	if sb.state == runtime.StateStopped {
		return fmt.Errorf("sandbox %s is stopped: %w", id, errdefs.ErrConflict)
	}
	if entries, err := os.ReadDir(imageDir); err != nil || len(entries) > 0 {
		return fmt.Errorf("image dir %q must exist and be empty: %w", imageDir, errdefs.ErrInvalidArgument)
	}
	if r.FailCheckpoint != nil {
		if err := r.FailCheckpoint(id, opts); err != nil {
			return err
		}
	}
	img := image{spec: sb.spec}
	if c, ok := sb.handler.(Cloner); ok {
		img.handler = c.Clone()
	}
	r.checkpoints++
	marker, err := writeMarker(imageDir, sb.spec, r.checkpoints)
	if err != nil {
		return fmt.Errorf("write marker: %w", err)
	}
	img.marker = marker
	r.images[filepath.Clean(imageDir)] = img
	if !opts.LeaveRunning {
		sb.stop()
	}
	return nil
}

// Restore implements runtime.Checkpointer. A stopped sandbox of the same
// id is replaced; a running or paused one is ErrAlreadyExists.
func (r *Runtime) Restore(ctx context.Context, spec runtime.Spec, imageDir string) (runtime.Info, error) {
	return r.restore(spec, imageDir, func(old *sandbox, ok bool) error {
		if ok && old.state != runtime.StateStopped {
			return fmt.Errorf("sandbox %s is %s: %w", spec.ID, old.state, errdefs.ErrAlreadyExists)
		}
		return nil
	})
}

// Replace implements runtime.Checkpointer.
func (r *Runtime) Replace(ctx context.Context, spec runtime.Spec, imageDir string) (runtime.Info, error) {
	return r.restore(spec, imageDir, func(old *sandbox, ok bool) error {
		if !ok {
			return fmt.Errorf("sandbox %s: %w", spec.ID, errdefs.ErrNotFound)
		}
		if old.state == runtime.StateStopped {
			return fmt.Errorf("sandbox %s is stopped: %w", spec.ID, errdefs.ErrConflict)
		}
		return nil
	})
}

// restore starts spec from the checkpoint in imageDir in place of whatever
// sandbox of that id there is, if allowed approves it (called twice: before
// the injected failure and again under the lock).
func (r *Runtime) restore(spec runtime.Spec, imageDir string, allowed func(old *sandbox, ok bool) error) (runtime.Info, error) {
	if err := validate(spec); err != nil {
		return runtime.Info{}, err
	}
	r.mu.Lock()
	old, ok := r.sandboxes[spec.ID]
	err := allowed(old, ok)
	r.mu.Unlock()
	if err != nil {
		return runtime.Info{}, err
	}
	if r.FailRestore != nil {
		if err := r.FailRestore(spec, imageDir); err != nil {
			return runtime.Info{}, err
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	img, ok := r.imageLocked(imageDir)
	if !ok || img.filesOnly {
		return runtime.Info{}, fmt.Errorf("no checkpoint in %q: %w", imageDir, errdefs.ErrInvalidArgument)
	}
	if _, err := os.Stat(filepath.Join(imageDir, MarkerFile)); err != nil {
		return runtime.Info{}, fmt.Errorf("checkpoint in %q was removed: %w", imageDir, errdefs.ErrInvalidArgument)
	}
	if img.spec.RootFS != spec.RootFS {
		return runtime.Info{}, fmt.Errorf("restore with rootfs %q, checkpoint has %q: %w",
			spec.RootFS, img.spec.RootFS, errdefs.ErrInvalidArgument)
	}
	// As runsc does: the writable filesystem's size is the checkpoint's.
	if img.spec.Resources.DiskMB != spec.Resources.DiskMB {
		return runtime.Info{}, fmt.Errorf("restore with a disk of %d MiB, checkpoint has %d: %w",
			spec.Resources.DiskMB, img.spec.Resources.DiskMB, errdefs.ErrInvalidArgument)
	}
	old, ok = r.sandboxes[spec.ID]
	if err := allowed(old, ok); err != nil {
		return runtime.Info{}, err
	}
	if ok {
		old.stop() // the old incarnation ends (Replace)
	}
	delete(r.sandboxes, spec.ID)
	h := r.newHandler(spec.ID)
	if c, ok := img.handler.(Cloner); ok {
		h = c.Clone()
	}
	return r.startLocked(spec, h).info(), nil
}

// imageLocked finds the checkpoint in imageDir: by directory, or — for an
// image whose files were moved or hard-linked into another directory, as a
// real image may be — by its marker, unique per checkpoint.
func (r *Runtime) imageLocked(imageDir string) (image, bool) {
	marker, err := os.ReadFile(filepath.Join(imageDir, MarkerFile))
	if img, ok := r.images[filepath.Clean(imageDir)]; ok && (err != nil || bytes.Equal(img.marker, marker)) {
		return img, true
	}
	if err != nil {
		return image{}, false
	}
	// Another image was moved into this directory since.
	for _, img := range r.images {
		if bytes.Equal(img.marker, marker) {
			return img, true
		}
	}
	return image{}, false
}
