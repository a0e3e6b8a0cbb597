package runtime

import (
	"context"
	"time"
)

// ExitReason says why a sandbox's supervisor ended without being asked to.
type ExitReason string

// The reasons a backend reports. A backend that cannot tell says
// ExitKilled.
const (
	// ExitOutOfMemory: the host's memory limit of the sandbox was hit (the
	// last resort behind the sandbox's own memory accounting).
	ExitOutOfMemory ExitReason = "out of memory"
	// ExitProcessLimit: the host's task limit of the sandbox was hit.
	ExitProcessLimit ExitReason = "process limit"
	// ExitCrashed: the supervisor failed on its own (a panic, a fatal error).
	ExitCrashed ExitReason = "crashed"
	// ExitKilled: the supervisor was killed from outside.
	ExitKilled ExitReason = "killed"
)

// Exit describes the end of a sandbox's supervisor.
type Exit struct {
	// Reason classifies the exit.
	Reason ExitReason
	// Detail is a human-readable account (counters, a log line), may be "".
	Detail string
	// At is when the backend saw the exit.
	At time.Time
}

// Waiter is the optional ability to learn at once that a sandbox's
// supervisor has exited, by waiting on it rather than polling.
type Waiter interface {
	// Wait blocks until the incarnation of sandbox id running when Wait was
	// called stops, and says why. It also returns when the backend's own
	// operations stop it (Delete, a Checkpoint that does not leave it
	// running, the old incarnation of a Replace): callers tell their own
	// operations apart. A sandbox that is not running returns at once with
	// ErrConflict, an unknown one with ErrNotFound; a cancelled ctx returns
	// ctx.Err().
	Wait(ctx context.Context, id string) (Exit, error)
	// Stopped says why sandbox id stopped when it did so before a Wait
	// could start (a death just after a create), as far as the backend can
	// still tell: ExitKilled when it cannot. A sandbox still running is
	// ErrConflict, an unknown one ErrNotFound.
	Stopped(ctx context.Context, id string) (Exit, error)
}
