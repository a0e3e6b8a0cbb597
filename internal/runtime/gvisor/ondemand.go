package gvisor

import (
	"context"
	"os/exec"
	"strings"
	"time"
)

// onDemandFlag makes runsc restores load memory pages from the image when
// the sandbox first touches them instead of copying the whole pages file
// into the sandbox's memory first (patches/gvisor/0001-restore-on-demand).
// Clones of one image then hold only the pages each touched since, and
// read the rest through the host page cache of the one pages file; a
// resume does not wait for the image to load. Its costs: a page's first
// touch reads it (from the page cache, or the disk after eviction), a
// checkpoint of the restored sandbox first reads the pages it never
// touched, and an image's files stay allocated until the last sandbox
// restored from it is gone, even after the image was deleted.
//
// It is a global flag (not one of restore's): the sandbox process reads it
// from its own start, and a standby container's is started by `create`.
const onDemandFlag = "--restore-on-demand"

// runscRestoresOnDemand reports whether the runsc binary knows
// onDemandFlag: an unpatched runsc refuses unknown flags, and then
// restores copy eagerly as before.
func (r *Runtime) runscRestoresOnDemand(ctx context.Context) bool {
	return r.runscKnows(ctx, onDemandFlag,
		"runsc cannot restore on demand (built without patches/gvisor?): every restore copies its whole image")
}

// runscKnows reports whether the runsc binary accepts global flag (one of
// patches/gvisor's), logging warning when it does not.
func (r *Runtime) runscKnows(ctx context.Context, flag, warning string) bool {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, r.cfg.RunscPath, flag, "--version").CombinedOutput()
	if err != nil {
		first, _, _ := strings.Cut(string(out), "\n")
		r.log.WarnContext(ctx, warning, "runsc", r.cfg.RunscPath, "flag", flag, "err", err, "output", first)
		return false
	}
	return true
}

// RestoresOnDemand reports whether restores load memory pages on demand:
// the runsc supports it and Config.EagerRestore is off.
func (r *Runtime) RestoresOnDemand() bool { return r.onDemand }
