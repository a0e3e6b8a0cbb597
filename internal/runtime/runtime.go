// Package runtime defines the small interface forkbox drives isolated
// sandboxes through. Backends live in sub-packages (gvisor, fake); every
// backend passes the conformance suite in runtimetest. Nothing here assumes
// gVisor: a microVM backend fits the same shape.
package runtime

import (
	"context"
	"crypto/rand"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/netpolicy"
)

// IDLength is the fixed length of sandbox ids. runsc matches container ids by
// prefix, so variable-length ids could be ambiguous; every id has this length.
const IDLength = 20

// Resources are the per-sandbox limits a backend enforces (cgroups for
// gVisor). Zero values mean the backend's defaults.
type Resources struct {
	// CPUCount is the CPU quota in whole cores.
	CPUCount int
	// MemoryMB is the memory the sandbox may use, in MiB. Backends add
	// headroom for their own overhead: hitting the limit kills the sandbox.
	MemoryMB int
	// PidsMax caps the number of tasks.
	PidsMax int
	// DiskMB is the size of the writable filesystem in MiB (0: the
	// backend's default). gVisor bounds / and /tmp by it together; a restore
	// must ask for the size its checkpoint was made with.
	DiskMB int
}

// Spec describes a sandbox to create or restore.
type Spec struct {
	// ID is the sandbox id, exactly IDLength characters of [a-z0-9].
	ID string
	// RootFS is the directory of the template's root filesystem. Backends
	// must treat it as read-only and shared: writes go to a private layer.
	RootFS string
	// Args is the first process (the forkbox agent) and its arguments.
	Args []string
	// Env is the first process's environment, as KEY=VALUE.
	Env []string
	// Hostname is the sandbox's host name.
	Hostname string
	// Resources are the limits to enforce.
	Resources Resources
	// AllowInternet lets the sandbox reach addresses outside the host through
	// NAT. Without it the sandbox can only be reached, never reach out.
	AllowInternet bool
	// Egress, when set, is the egress policy to enforce instead of the
	// plain internet on/off of AllowInternet (see NetworkPolicer).
	Egress *netpolicy.Policy
	// Mounts are host directories bound read-write into the sandbox, past
	// the private layer: what the sandbox writes there lands on the host
	// (template builds run their steps in one). Destinations must exist in
	// RootFS.
	Mounts []Mount
	// Admin grants CAP_SYS_ADMIN inside the sandbox's own kernel (a build
	// sandbox mounts /proc and /dev for the chroot its steps run in).
	Admin bool
	// Volumes are host directories (mounted volumes) the sandbox sees
	// read-write at VolumeRoot/0, VolumeRoot/1, …, in order. Unlike Mounts
	// they may differ between a checkpoint and its restore: every sandbox
	// has the one mount at VolumeRoot, whatever it holds.
	Volumes []string
}

// VolumeRoot is where a sandbox sees Spec.Volumes; the Manager links
// each volume's requested path to VolumeRoot/<index>.
const VolumeRoot = "/.forkbox-volumes"

// Mount binds host directory Source at Destination inside a sandbox.
type Mount struct {
	Source      string
	Destination string
}

// State is a backend's view of one sandbox.
type State string

// The states a backend reports.
const (
	StateCreated State = "created" // prepared, first process not started
	StateRunning State = "running" // first process running
	StatePaused  State = "paused"  // frozen in memory (Freeze)
	StateStopped State = "stopped" // first process gone; resources held until Delete
)

// Info describes one sandbox as the backend sees it.
type Info struct {
	ID    string
	State State
	// Addr is the sandbox's own network address as seen from the host (for
	// metrics and diagnostics; connect through Dial).
	Addr netip.Addr
	// Pid is the host pid of the sandbox's supervisor, 0 if none.
	Pid int
	// CreatedAt is when the backend created the sandbox.
	CreatedAt time.Time
}

// Stats is a point-in-time resource reading of one sandbox.
type Stats struct {
	// CPUUsage is the total CPU time used since start.
	CPUUsage time.Duration
	// MemoryBytes is the memory in use, including the backend's overhead.
	MemoryBytes uint64
	// MemoryLimitBytes is the enforced limit (0 if none).
	MemoryLimitBytes uint64
	// Pids is the number of tasks.
	Pids int
}

// Runtime creates, inspects and destroys sandboxes. Every method takes a
// context first and is safe for concurrent use on different ids; callers
// serialise operations on one id. Errors wrap internal/errdefs classes:
// ErrNotFound for an unknown id, ErrAlreadyExists for a duplicate create.
type Runtime interface {
	// Name identifies the backend ("gvisor", "fake").
	Name() string
	// Create prepares a sandbox (network, limits, private filesystem layer)
	// and starts Spec.Args as its first process. It returns once the process
	// runs; it does not wait for the process to listen. On failure nothing of
	// the sandbox is left behind.
	Create(ctx context.Context, spec Spec) (Info, error)
	// Delete kills every process of the sandbox and releases everything it
	// held (network namespace, address, cgroups, mounts, state). Deleting an
	// unknown id returns ErrNotFound; deleting twice is harmless otherwise.
	Delete(ctx context.Context, id string) error
	// Info returns the current state of one sandbox.
	Info(ctx context.Context, id string) (Info, error)
	// List returns every sandbox the backend holds, including ones created by
	// an earlier daemon process, so a restarted daemon can reattach.
	List(ctx context.Context) ([]Info, error)
	// Dial opens a TCP connection to port inside the sandbox.
	Dial(ctx context.Context, id string, port int) (net.Conn, error)
	// Stats reads the sandbox's resource use.
	Stats(ctx context.Context, id string) (Stats, error)
	// Freeze suspends every process of the sandbox in memory; Thaw resumes
	// them. Used to hold a sandbox still for a brief operation.
	Freeze(ctx context.Context, id string) error
	// Thaw resumes a frozen sandbox.
	Thaw(ctx context.Context, id string) error
}

// CheckpointOptions tune Checkpoint.
type CheckpointOptions struct {
	// LeaveRunning keeps the sandbox running after the image is written (a
	// live snapshot). Without it the sandbox is stopped (left for Delete).
	LeaveRunning bool
}

// Checkpointer is the optional ability to save a sandbox's whole state
// (memory and filesystem) to a directory and start sandboxes from it.
type Checkpointer interface {
	// Checkpoint writes the sandbox's state into imageDir, which must exist
	// and be empty.
	Checkpoint(ctx context.Context, id string, imageDir string, opts CheckpointOptions) error
	// Restore creates a running sandbox spec.ID from the image in imageDir.
	// spec must name the same RootFS as the checkpointed sandbox; Env and
	// Hostname may differ. On failure nothing is left behind.
	Restore(ctx context.Context, spec Spec, imageDir string) (Info, error)
	// Replace turns running or frozen sandbox spec.ID into the state in
	// imageDir, keeping its id: the new incarnation starts first, then the
	// old one goes, so a failure leaves the old one as it was. Other ids are
	// ErrNotFound; a stopped one is ErrConflict.
	Replace(ctx context.Context, spec Spec, imageDir string) (Info, error)
}

// idAlphabet is lowercase alphanumerics: ids appear in host names.
const idAlphabet = "abcdefghijklmnopqrstuvwxyz0123456789"

// NewID returns a fresh random id of IDLength characters that starts with a
// letter, so it is a valid host-name label everywhere.
func NewID() string {
	b := make([]byte, IDLength)
	rand.Read(b)
	for i := range b {
		b[i] = idAlphabet[int(b[i])%len(idAlphabet)]
	}
	b[0] = idAlphabet[int(b[0])%26]
	return string(b)
}

// ValidateID checks that id has the fixed IDLength and only [a-z0-9], and
// returns an error wrapping errdefs.ErrInvalidArgument otherwise. Backends
// call it before touching the host.
func ValidateID(id string) error {
	if len(id) != IDLength {
		return fmt.Errorf("id %q: length %d, want %d: %w", id, len(id), IDLength, errdefs.ErrInvalidArgument)
	}
	for _, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			return fmt.Errorf("id %q: character %q not in [a-z0-9]: %w", id, c, errdefs.ErrInvalidArgument)
		}
	}
	return nil
}
