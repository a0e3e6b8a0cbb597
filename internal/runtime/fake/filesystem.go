package fake

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/runtime"
)

// FilesCloner is implemented by handlers whose state has a filesystem part:
// SaveFilesystem stores CloneFiles (the files, not the memory), and every
// CreateFromFilesystem serves a fresh copy of that.
type FilesCloner interface {
	CloneFiles() http.Handler
}

// SaveFilesystem implements runtime.FilesystemSaver: it records the
// sandbox's files (its handler's CloneFiles, if it is a FilesCloner) under
// imageDir and writes MarkerFile there. The sandbox keeps running.
func (r *Runtime) SaveFilesystem(ctx context.Context, id string, imageDir string) error {
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
	img := image{spec: sb.spec, filesOnly: true}
	if c, ok := sb.handler.(FilesCloner); ok {
		img.handler = c.CloneFiles()
	}
	r.checkpoints++
	if img.marker, err = writeMarker(imageDir, sb.spec, r.checkpoints); err != nil {
		return fmt.Errorf("write marker: %w", err)
	}
	r.images[filepath.Clean(imageDir)] = img
	return nil
}

// CreateFromFilesystem implements runtime.FilesystemSaver: a Create whose
// handler starts with the saved files (and nothing else of the old one).
func (r *Runtime) CreateFromFilesystem(ctx context.Context, spec runtime.Spec, imageDir string) (runtime.Info, error) {
	if err := validate(spec); err != nil {
		return runtime.Info{}, err
	}
	if r.FailCreate != nil {
		if err := r.FailCreate(spec); err != nil {
			return runtime.Info{}, err
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	img, ok := r.imageLocked(imageDir)
	if !ok || !img.filesOnly {
		return runtime.Info{}, fmt.Errorf("no saved filesystem in %q: %w", imageDir, errdefs.ErrInvalidArgument)
	}
	if img.spec.RootFS != spec.RootFS {
		return runtime.Info{}, fmt.Errorf("create with rootfs %q, saved over %q: %w", spec.RootFS, img.spec.RootFS, errdefs.ErrInvalidArgument)
	}
	if _, ok := r.sandboxes[spec.ID]; ok {
		return runtime.Info{}, fmt.Errorf("sandbox %s: %w", spec.ID, errdefs.ErrAlreadyExists)
	}
	h := r.newHandler(spec.ID)
	if c, ok := img.handler.(FilesCloner); ok {
		h = c.CloneFiles()
	}
	return r.startLocked(spec, h).info(), nil
}
