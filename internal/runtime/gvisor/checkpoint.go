package gvisor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/forkbox/forkbox/internal/cleanup"
	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/runtime"
)

// Checkpoint implements runtime.Checkpointer with `runsc checkpoint`. With
// --overlay2=root:memory the image holds the sandbox's files too.
func (r *Runtime) Checkpoint(ctx context.Context, id string, imageDir string, opts runtime.CheckpointOptions) error {
	h, err := r.loadHandle(id)
	if err != nil {
		return err
	}
	if err := emptyDir(imageDir); err != nil {
		return err
	}
	args := []string{"checkpoint", "--image-path=" + imageDir}
	if opts.LeaveRunning {
		args = append(args, "--leave-running")
	}
	if _, err := r.run(ctx, r.cfg.Timeout, append(args, h.cid())...); err != nil {
		if errors.Is(err, errdefs.ErrUnavailable) && ctx.Err() == nil { // runsc's own timeout
			r.logStacks(ctx, h.cid(), "checkpoint timed out")
		}
		return err
	}
	if err := noteFromFiles(h, imageDir); err != nil {
		return err
	}
	if opts.LeaveRunning {
		return nil
	}
	// runsc returns once the image is written; the sandbox exits after.
	return r.waitStopped(ctx, h.cid(), r.cfg.Timeout/5)
}

// Restore implements runtime.Checkpointer with `runsc restore --detach`,
// into a standby container of spec's shape when there is one.
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
	cl := cleanup.New(r.log)
	defer func() {
		if err != nil {
			cl.Run(ctx)
		}
	}()
	var h handle
	var bundle string
	if old, herr := r.loadHandle(spec.ID); herr == nil {
		h, bundle, err = r.prepareInPlace(ctx, spec, old, cl)
	} else {
		r.standby.begin()
		defer r.standby.end(spec)
		h, bundle, err = r.prepareRestore(ctx, spec, !fromFilesImage(imageDir), cl)
	}
	if err != nil {
		return runtime.Info{}, err
	}
	if err := r.runDetached(ctx, r.cfg.Timeout, filepath.Join(bundle, "runsc.log"),
		append(restoreFlags(imageDir), "restore", "--detach", "--bundle="+bundle, "--pid-file="+pidFile(bundle), "--image-path="+imageDir, h.cid())...); err != nil {
		return runtime.Info{}, err
	}
	r.noteSupervisor(h.cid(), bundle)
	if err := r.raiseMemoryLimit(h.cid(), h.Resources); err != nil {
		return runtime.Info{}, err
	}
	if h, err = r.inheritFromFiles(h, imageDir); err != nil {
		return runtime.Info{}, err
	}
	cl.Disarm()
	return startedInfo(h), nil
}

// prepareRestore readies a new sandbox for a restore: a standby container
// of its shape if one is ready and useStandby, else a bundle for runsc to
// create one. It saves and returns the handle, and returns the bundle.
//
// An image of a sandbox booted from files cannot go to a standby: its
// restore needs a relaxed spec check (restoreFlags), and a standby's
// sandbox process was started with the strict one, so runsc refuses the
// annotation it lacks.
func (r *Runtime) prepareRestore(ctx context.Context, spec runtime.Spec, useStandby bool, cl *cleanup.Stack) (handle, string, error) {
	var box standbyBox
	ok := false
	if useStandby && len(spec.Volumes) == 0 {
		box, ok = r.standby.take(spec)
	}
	if !ok {
		h, err := r.prepare(ctx, spec, cl)
		if err != nil {
			return handle{}, "", err
		}
		cl.Add("runsc delete", func(ctx context.Context) error { r.destroy(ctx, spec.ID); return nil })
		return h, r.sandboxDir(spec.ID), nil
	}
	cl.Add("discard standby", func(ctx context.Context) error { r.standby.discard(ctx, box); return nil })
	if err := r.standby.adopt(box); err != nil {
		return handle{}, "", err
	}
	if err := r.applyEgress(ctx, box.cid, spec); err != nil {
		return handle{}, "", err
	}
	dir := r.sandboxDir(spec.ID)
	if err := os.Mkdir(dir, 0o700); errors.Is(err, os.ErrExist) {
		return handle{}, "", fmt.Errorf("sandbox %s: %w", spec.ID, errdefs.ErrAlreadyExists)
	} else if err != nil {
		return handle{}, "", fmt.Errorf("create %s: %w", dir, err)
	}
	cl.Add("remove sandbox dir", func(context.Context) error { return os.RemoveAll(dir) })
	h := box.handle(spec)
	// Saved before the restore, as for a fresh container: after a crash in
	// between, the sandbox is known with its container, and removing it
	// removes both.
	if err := r.saveHandle(h); err != nil {
		return handle{}, "", err
	}
	return h, box.dir, nil
}

// prepareInPlace readies stopped sandbox old for a restore under its own
// id: the old container goes, the namespace stays and gets eth0's address
// and route back (runsc removed them, trap 5).
func (r *Runtime) prepareInPlace(ctx context.Context, spec runtime.Spec, old handle, cl *cleanup.Stack) (handle, string, error) {
	info, err := r.info(ctx, old)
	if err != nil {
		return handle{}, "", err
	}
	if info.State != runtime.StateStopped {
		return handle{}, "", fmt.Errorf("sandbox %s is %s: %w", spec.ID, info.State, errdefs.ErrAlreadyExists)
	}
	// From here a failure removes the whole sandbox: it was dead already.
	cl.Add("delete sandbox", func(ctx context.Context) error { return r.Delete(ctx, spec.ID) })
	r.destroy(ctx, old.cid())
	if _, ok := r.cfg.Net.Get(old.cid()); !ok {
		if _, err = r.cfg.Net.Allocate(ctx, old.cid(), spec.AllowInternet); err != nil {
			return handle{}, "", err
		}
	} else if err := r.cfg.Net.Reconfigure(ctx, old.cid()); err != nil {
		return handle{}, "", err
	}
	if err := r.applyEgress(ctx, old.cid(), spec); err != nil {
		return handle{}, "", err
	}
	lease, _ := r.cfg.Net.Get(old.cid())
	h := newHandle(spec, withDefaults(spec.Resources, r.cfg.Defaults), lease)
	h.Container, h.Bundle = old.Container, old.Bundle
	bundle := old.Bundle
	if bundle == "" {
		bundle = r.sandboxDir(spec.ID)
	}
	return h, bundle, r.writeBundle(spec, h, bundle)
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

// logStacks logs the sentry's goroutine stacks (runsc debug --stacks) of
// container cid, which what says is stuck: a hang that only shows once in
// many runs is then diagnosed from the log it left.
func (r *Runtime) logStacks(ctx context.Context, cid, what string) {
	out, err := r.run(context.WithoutCancel(ctx), 15*time.Second, "debug", "--stacks", cid)
	const max = 256 << 10
	if len(out) > max {
		out = out[:max]
	}
	r.log.WarnContext(ctx, what+": the sentry's stacks", "container", cid, "stacks", string(out), "err", err)
}
