package gvisor

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/runtime"
)

// Replace implements runtime.Checkpointer. The image is restored into
// another container (a standby one if ready, else one runsc creates under
// a fresh id), the handle is switched to it, and the old container is
// removed in the background: once the handle names the new container the
// old one is a leftover that a restarted runtime would remove anyway, so
// its teardown need not hold up the caller.
func (r *Runtime) Replace(ctx context.Context, spec runtime.Spec, imageDir string) (info runtime.Info, err error) {
	if err := validate(spec); err != nil {
		return runtime.Info{}, err
	}
	old, err := r.loadHandle(spec.ID)
	if err != nil {
		return runtime.Info{}, err
	}
	if st, err := r.info(ctx, old); err != nil {
		return runtime.Info{}, err
	} else if st.State == runtime.StateStopped {
		return runtime.Info{}, fmt.Errorf("sandbox %s is stopped: %w", spec.ID, errdefs.ErrConflict)
	}
	r.standby.begin()
	defer r.standby.end(spec)
	var box standbyBox
	ok := false
	if len(spec.Volumes) == 0 { // a standby has no volumes in it
		box, ok = r.standby.take(spec)
	}
	if !ok {
		if box, err = r.standby.create(ctx, spec, runtime.NewID()); err != nil {
			return runtime.Info{}, err
		}
	}
	defer func() {
		if err != nil { // the old container is untouched until the handle is saved
			r.standby.discard(ctx, box)
		}
	}()
	if err := r.standby.adopt(box); err != nil {
		return runtime.Info{}, err
	}
	if err := r.applyEgress(ctx, box.cid, spec); err != nil {
		return runtime.Info{}, err
	}
	if err := r.runDetached(ctx, r.cfg.Timeout, filepath.Join(box.dir, "runsc.log"),
		append(restoreFlags(imageDir), "restore", "--detach", "--bundle="+box.dir, "--image-path="+imageDir, box.cid)...); err != nil {
		return runtime.Info{}, err
	}
	if err := r.raiseMemoryLimit(box.cid, box.res); err != nil {
		return runtime.Info{}, err
	}
	h := box.handle(spec)
	h.FromFiles = fromFilesImage(imageDir)
	if err := r.saveHandle(h); err != nil {
		return runtime.Info{}, err
	}
	r.bg.Add(1)
	go func() {
		defer r.bg.Done()
		r.removeReplaced(context.WithoutCancel(ctx), old)
	}()
	return startedInfo(h), nil
}

// removeReplaced removes the container of an old incarnation of a sandbox
// whose handle now names another container. Its bundle, when it was the
// sandbox's own directory, holds the new handle: only runsc's files go.
func (r *Runtime) removeReplaced(ctx context.Context, old handle) {
	if err := r.removeContainer(ctx, old.cid(), old.Bundle); err != nil {
		r.log.WarnContext(ctx, "remove replaced container", "id", old.cid(), "err", err)
	}
	if old.Bundle == "" {
		for _, f := range []string{"config.json", "runsc.log"} {
			os.Remove(filepath.Join(r.sandboxDir(old.ID), f))
		}
	}
}
