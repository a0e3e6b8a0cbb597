package gvisor

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/runtime"
)

// Checkpoint implements runtime.Checkpointer with `runsc checkpoint`. With
// --overlay2=root:memory the image holds the sandbox's files too.
func (r *Runtime) Checkpoint(ctx context.Context, id string, imageDir string, opts runtime.CheckpointOptions) error {
	if _, err := r.loadHandle(id); err != nil {
		return err
	}
	if err := emptyDir(imageDir); err != nil {
		return err
	}
	args := []string{"checkpoint", "--image-path=" + imageDir}
	if opts.LeaveRunning {
		args = append(args, "--leave-running")
	}
	if _, err := r.run(ctx, r.cfg.Timeout, append(args, id)...); err != nil {
		return err
	}
	if opts.LeaveRunning {
		return nil
	}
	// runsc returns once the image is written; the sandbox exits after.
	return r.waitStopped(ctx, id, r.cfg.Timeout/5)
}

// Restore implements runtime.Checkpointer with `runsc restore --detach`.
// If spec.ID names a stopped sandbox (checkpointed without LeaveRunning),
// the restore replaces it in place, reusing its network namespace; a
// running or paused one is ErrAlreadyExists. On failure the sandbox is
// removed entirely.
func (r *Runtime) Restore(ctx context.Context, spec runtime.Spec, imageDir string) (info runtime.Info, err error) {
	if err := validate(spec); err != nil {
		return runtime.Info{}, err
	}
	if fi, err := os.Stat(imageDir); err != nil || !fi.IsDir() {
		return runtime.Info{}, fmt.Errorf("image %q is not a directory: %w", imageDir, errdefs.ErrInvalidArgument)
	}
	cl := &cleanup{log: r.log}
	defer func() {
		if err != nil {
			cl.run(ctx)
		}
	}()
	if _, herr := r.loadHandle(spec.ID); herr == nil {
		err = r.prepareInPlace(ctx, spec, cl)
	} else {
		_, err = r.prepare(ctx, spec, cl)
	}
	if err != nil {
		return runtime.Info{}, err
	}
	dir := r.sandboxDir(spec.ID)
	cl.add("runsc delete", func(ctx context.Context) error { r.destroy(ctx, spec.ID); return nil })
	if err := r.runDetached(ctx, r.cfg.Timeout, filepath.Join(dir, "runsc.log"),
		"restore", "--detach", "--bundle="+dir, "--image-path="+imageDir, spec.ID); err != nil {
		return runtime.Info{}, err
	}
	cl.disarm()
	h, err := r.loadHandle(spec.ID)
	if err != nil {
		return runtime.Info{}, err
	}
	return startedInfo(h), nil
}

// prepareInPlace readies a stopped sandbox for a restore under its own id:
// the old container goes, the namespace stays and gets eth0's address and
// route back (runsc removed them, trap 5).
func (r *Runtime) prepareInPlace(ctx context.Context, spec runtime.Spec, cl *cleanup) error {
	info, err := r.Info(ctx, spec.ID)
	if err != nil {
		return err
	}
	if info.State != runtime.StateStopped {
		return fmt.Errorf("sandbox %s is %s: %w", spec.ID, info.State, errdefs.ErrAlreadyExists)
	}
	// From here a failure removes the whole sandbox: it was dead already.
	cl.add("delete sandbox", func(ctx context.Context) error { return r.Delete(ctx, spec.ID) })
	r.destroy(ctx, spec.ID)
	lease, ok := r.cfg.Net.Get(spec.ID)
	if !ok {
		if lease, err = r.cfg.Net.Allocate(ctx, spec.ID, spec.AllowInternet); err != nil {
			return err
		}
	} else if err := r.cfg.Net.Reconfigure(ctx, spec.ID); err != nil {
		return err
	}
	_, err = r.writeBundle(spec, lease)
	return err
}

// emptyDir checks that dir exists and is empty, as Checkpoint requires.
func emptyDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("image dir %q: %v: %w", dir, err, errdefs.ErrInvalidArgument)
	}
	if len(entries) > 0 {
		return fmt.Errorf("image dir %q is not empty: %w", dir, errdefs.ErrInvalidArgument)
	}
	return nil
}
