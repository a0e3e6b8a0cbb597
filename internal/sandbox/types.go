package sandbox

import (
	"time"

	"github.com/forkbox/forkbox/internal/netpolicy"
	"github.com/forkbox/forkbox/internal/store"
)

// Sandbox is a copy of one sandbox's public fields and state, safe to keep.
// (The store's record holds more: where its image and root filesystem are.)
type Sandbox struct {
	// VolumeMounts are the volumes the sandbox mounts, in mount order.
	VolumeMounts []VolumeMount
	ID           string
	TemplateID   string
	Alias        string
	ClientID     string
	// State is the precise lifecycle state; State.Public() is the API's.
	State       State
	Metadata    map[string]string
	EnvVars     map[string]string
	CPUCount    int
	MemoryMB    int
	DiskSizeMB  int
	EnvdVersion string
	AutoPause   bool
	AutoResume  bool
	// AutoPauseFilesOnly makes the timeout's pause keep only the files.
	AutoPauseFilesOnly bool
	// FilesOnly: paused keeping only its files (the resume cold-boots).
	FilesOnly bool
	// Secure makes the data plane require EnvdAccessToken.
	Secure bool
	// PrivateTraffic makes ports other than the agent's require
	// TrafficAccessToken.
	PrivateTraffic bool
	AllowInternet  bool
	// Network is the egress rules in force besides AllowInternet (nil:
	// none); stored normalised.
	Network *netpolicy.Rules
	// Inbound is how the data plane reaches its ports (zero: the client's
	// Host, plain HTTP).
	Inbound netpolicy.Inbound
	// IAM is its workload tokens (E2B's iam.tokens), nil if none.
	IAM                *netpolicy.IAM
	EnvdAccessToken    string
	TrafficAccessToken string
	StartedAt          time.Time
	EndAt              time.Time
	// ParentID is the snapshot this sandbox was started from ("" for a
	// template); Origin the operation that made it.
	ParentID string
	Origin   Origin
	// Rollbacks lists its in-place restores, oldest first.
	Rollbacks []Rollback
	// Error says why a sandbox died, for diagnostics.
	Error string
	// KillReason, for a sandbox that died on its own (exits.go), is why:
	// "out of memory", "process limit", "crashed" or "killed"; KilledAt is
	// when the daemon learnt of it.
	KillReason string
	KilledAt   time.Time
}

// Rollback records one in-place restore of a sandbox to a snapshot.
type Rollback struct {
	SnapshotID string    `json:"snapshotID"`
	At         time.Time `json:"at"`
}

// Snapshot is a captured sandbox state: usable wherever a template is.
type Snapshot struct {
	ID string
	// Names are the aliases it can also be created from.
	Names []string
	// SourceSandboxID is the sandbox it was taken of.
	SourceSandboxID string
	Origin          Origin
	CreatedAt       time.Time
	// ExpiresAt, when set, lets the collector delete it once unused.
	ExpiresAt time.Time
	// Temporary snapshots (a clone's) go when their last user is gone.
	Temporary bool
}

func (e *entry) view() *Sandbox { return sandboxOf(&e.rec, e.state) }

// sandboxOf copies a record's public fields.
func sandboxOf(r *store.Sandbox, st State) *Sandbox {
	return &Sandbox{
		ID: r.ID, TemplateID: r.TemplateID, Alias: r.Alias, ClientID: r.ClientID, State: st,
		Metadata: cloneMap(r.Metadata), EnvVars: cloneMap(r.EnvVars),
		CPUCount: r.CPUCount, MemoryMB: r.MemoryMB, DiskSizeMB: r.DiskSizeMB, EnvdVersion: r.EnvdVersion,
		AutoPause: r.AutoPause, AutoResume: r.AutoResume, AutoPauseFilesOnly: r.AutoPauseFilesOnly,
		FilesOnly: st == StatePaused && r.ImageDir != "" && isFilesystemImage(r.ImageDir),
		Secure:    r.Secure, PrivateTraffic: r.PrivateTraffic, AllowInternet: r.AllowInternet, Network: r.Network,
		EnvdAccessToken: r.EnvdAccessToken, TrafficAccessToken: r.TrafficAccessToken,
		StartedAt: r.StartedAt, EndAt: r.EndAt, ParentID: r.ParentID, Origin: Origin(r.Origin),
		Rollbacks: rollbacksOf(r.Rollbacks), Error: r.Error,
		KillReason: r.KillReason, KilledAt: r.KilledAt, Inbound: inboundOf(r.Inbound), IAM: r.IAM,
		VolumeMounts: volumeMountsOf(r.Volumes),
	}
}

// volumeMountsOf copies a record's volume mounts.
func volumeMountsOf(vms []store.VolumeMount) []VolumeMount {
	out := make([]VolumeMount, 0, len(vms))
	for _, vm := range vms {
		out = append(out, VolumeMount{VolumeID: vm.VolumeID, Name: vm.Name, Path: vm.Path})
	}
	return out
}

// VolumeMount is one volume a sandbox mounts, at Path.
type VolumeMount struct {
	VolumeID, Name, Path string
}

func inboundOf(in *netpolicy.Inbound) netpolicy.Inbound {
	if in == nil {
		return netpolicy.Inbound{}
	}
	return *in
}

func rollbacksOf(rs []store.Rollback) []Rollback {
	if rs == nil {
		return nil
	}
	out := make([]Rollback, len(rs))
	for i, r := range rs {
		out[i] = Rollback{SnapshotID: r.SnapshotID, At: r.At}
	}
	return out
}

// snapshotOf copies a snapshot record's public fields.
func snapshotOf(t *store.Template) *Snapshot {
	return &Snapshot{
		ID: t.ID, Names: append([]string(nil), t.Aliases...), SourceSandboxID: t.SourceSandboxID,
		Origin: Origin(t.Origin), CreatedAt: t.CreatedAt, ExpiresAt: t.ExpiresAt, Temporary: t.Temporary,
	}
}
