package faults

import (
	"context"
	"fmt"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/runtime"
)

// The optional abilities pass through to the wrapped backend (no faults are
// injected in them): without Wait a daemon under fault injection would not
// see its sandboxes die, and the tests that use faults would check a daemon
// that behaves unlike the real one. A backend without an ability answers
// ErrUnavailable.
var (
	_ runtime.Waiter           = (*Runtime)(nil)
	_ runtime.MemoryWatcher    = (*Runtime)(nil)
	_ runtime.FilesystemSaver  = (*Runtime)(nil)
	_ runtime.NetworkPolicer   = (*Runtime)(nil)
	_ runtime.UpperLayerWriter = (*Runtime)(nil)
)

// Wait implements runtime.Waiter.
func (r *Runtime) Wait(ctx context.Context, id string) (runtime.Exit, error) {
	w, ok := r.Runtime.(runtime.Waiter)
	if !ok {
		return runtime.Exit{}, fmt.Errorf("%s cannot wait on sandboxes: %w", r.Name(), errdefs.ErrUnavailable)
	}
	return w.Wait(ctx, id)
}

// Stopped implements runtime.Waiter.
func (r *Runtime) Stopped(ctx context.Context, id string) (runtime.Exit, error) {
	w, ok := r.Runtime.(runtime.Waiter)
	if !ok {
		return runtime.Exit{}, fmt.Errorf("%s cannot wait on sandboxes: %w", r.Name(), errdefs.ErrUnavailable)
	}
	return w.Stopped(ctx, id)
}

// SaveFilesystem implements runtime.FilesystemSaver.
func (r *Runtime) SaveFilesystem(ctx context.Context, id, imageDir string) error {
	fs, ok := r.Runtime.(runtime.FilesystemSaver)
	if !ok {
		return fmt.Errorf("%s cannot save filesystems: %w", r.Name(), errdefs.ErrUnavailable)
	}
	return fs.SaveFilesystem(ctx, id, imageDir)
}

// CreateFromFilesystem implements runtime.FilesystemSaver.
func (r *Runtime) CreateFromFilesystem(ctx context.Context, spec runtime.Spec, imageDir string) (runtime.Info, error) {
	fs, ok := r.Runtime.(runtime.FilesystemSaver)
	if !ok {
		return runtime.Info{}, fmt.Errorf("%s cannot save filesystems: %w", r.Name(), errdefs.ErrUnavailable)
	}
	return fs.CreateFromFilesystem(ctx, spec, imageDir)
}

// WriteUpperLayer implements runtime.UpperLayerWriter.
func (r *Runtime) WriteUpperLayer(ctx context.Context, id, path string) error {
	w, ok := r.Runtime.(runtime.UpperLayerWriter)
	if !ok {
		return fmt.Errorf("%s cannot write upper layers: %w", r.Name(), errdefs.ErrUnavailable)
	}
	return w.WriteUpperLayer(ctx, id, path)
}

// WatchMemory implements runtime.MemoryWatcher.
func (r *Runtime) WatchMemory(ctx context.Context, id string, step uint64, grew func()) error {
	w, ok := r.Runtime.(runtime.MemoryWatcher)
	if !ok {
		return fmt.Errorf("%s cannot watch memory: %w", r.Name(), errdefs.ErrUnavailable)
	}
	return w.WatchMemory(ctx, id, step, grew)
}
