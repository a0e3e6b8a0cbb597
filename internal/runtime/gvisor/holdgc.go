package gvisor

import "context"

// holdGCFlag makes a restore hold the sentry's Go garbage collector off
// while it decodes the kernel's state, and return the heap's free pages to
// the host two seconds later (patches/gvisor/0003-restore-hold-gc). A
// restore is a fresh process whose decoded state nearly all stays live, so
// collecting during it only re-marks a growing heap, on CPUs that clones
// and resumes share: the restore window went from 43–54 ms to 28–40 ms, and
// an idle restored sandbox holds 1.6 MiB less (docs/benchmarks.md). Its
// cost: the sentry's heap may grow up to 64 MiB more during a restore, and
// one full collection follows each restore.
//
// A global flag, like onDemandFlag: the sandbox process reads it from its
// own start, and a standby container's is started by `create`.
const holdGCFlag = "--restore-hold-gc"

// runscHoldsGC reports whether the runsc binary knows holdGCFlag.
func (r *Runtime) runscHoldsGC(ctx context.Context) bool {
	return r.runscKnows(ctx, holdGCFlag,
		"runsc cannot hold its garbage collector during restores (built without patches/gvisor?)")
}
