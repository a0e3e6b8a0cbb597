// Package gvisor is the runtime.Runtime backend that runs every sandbox as a
// gVisor sandbox through the static runsc binary: one OCI bundle, one
// network namespace (internal/netns) and one cgroup per sandbox, with the
// template rootfs shared read-only and writes kept in the sandbox's memory
// (--overlay2=root:memory).
package gvisor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/forkbox/forkbox/internal/cleanup"
	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/netns"
	"github.com/forkbox/forkbox/internal/runtime"
)

// Config configures a Runtime.
type Config struct {
	// RunscPath is the static runsc binary. Required.
	RunscPath string
	// StateDir holds runsc's --root and the per-sandbox bundles. Required.
	StateDir string
	// Net allocates sandbox networks. Required.
	Net *netns.Manager
	// Logger receives diagnostics. Default slog.Default().
	Logger *slog.Logger
	// AppHugePages backs sandboxes' application memory with huge pages
	// (runsc --app-huge-pages); off, an idle sandbox is ~9 MiB smaller
	// (docs/benchmarks.md, issue 22). Images are keyed by it (FlagsFor).
	AppHugePages bool
	// SystrapFastPath lets systrap's fast path spin for syscalls (runsc's
	// default); off (--systrap-disable-fast-path), a sandbox sleeps while
	// it waits. Each sandbox decides alone whether to spin, so a hundred
	// at once on two CPUs spun against each other: 100 commands at once
	// took 31 s p50 with it, 5 s without, one at a time the same.
	SystrapFastPath bool
	// Defaults fill zero fields of Spec.Resources. Zero fields here mean
	// 1 CPU, 512 MiB and 1024 pids.
	Defaults runtime.Resources
	// CgroupParent is the cgroup (under every v1 controller) sandboxes'
	// cgroups are created in. Default "forkbox".
	CgroupParent string
	// DebugLogDir, if set, turns on runsc debug logs there.
	DebugLogDir string
	// Timeout bounds slow runsc commands (create, start, checkpoint,
	// restore). Default 60 s. Quick commands get a fifth of it.
	Timeout time.Duration
	// PanicSignal, if set, is a host signal that makes a sentry panic
	// instead of passing it to the sandbox (runsc --panic-signal): a way
	// to take a stack dump of a stuck sandbox — and to crash one on purpose,
	// as the tests of Wait's crash reports do.
	PanicSignal syscall.Signal
	// Standby is how many containers per sandbox shape (rootfs, limits,
	// internet access) are kept created but not started, for restores to
	// take: a restore into one skips runsc's sandbox and gofer start-up,
	// about half of its time. 0 turns it off. Close removes them.
	Standby int
	// EagerRestore turns off restoring on demand (runsc --restore-on-demand,
	// patches/gvisor/0001): every restore then copies its image's whole
	// pages file into the sandbox's own memory before the sandbox runs, so N
	// clones of a big sandbox hold N copies of its memory and a resume waits
	// for the copy. A runsc without the flag restores eagerly anyway.
	EagerRestore bool
	// CollectDuringRestore lets the sentry's garbage collector run while a
	// restore decodes the kernel's state, as unpatched runsc does, instead
	// of holding it off (runsc --restore-hold-gc, patches/gvisor/0003). A
	// runsc without the flag collects anyway.
	CollectDuringRestore bool
	// PortableImages lets an image restore where the paths of its root
	// filesystem differ from where it was written (another node's image
	// cache: a cluster sharing its images): runsc's check that the
	// restore's spec annotations match the checkpoint's, which include the
	// rootfs's host path, only warns (--restore-spec-validation=warning,
	// on every runsc command, so standby containers take such restores).
	PortableImages bool
}

// Runtime is the gVisor backend. It is safe for concurrent use on
// different ids.
type Runtime struct {
	cfg     Config
	log     *slog.Logger
	standby *standby
	// onDemand: restores read memory pages when the sandbox touches them
	// (runsc --restore-on-demand).
	onDemand bool
	// holdGC: restores hold the sentry's collector off (runsc
	// --restore-hold-gc).
	holdGC  bool
	bg      sync.WaitGroup // background removals of replaced containers
	nextCPU atomic.Uint64  // the host CPU pinCPUs gives next
	// supervisors caches, by container id, the sandbox process Wait found
	// (exits.go).
	supervisors sync.Map
}

var (
	_ runtime.Runtime      = (*Runtime)(nil)
	_ runtime.Checkpointer = (*Runtime)(nil)
)

// New checks cfg, creates the state directories and reattaches to what an
// earlier daemon left: networks of known sandboxes are kept, networks and
// runsc containers without a handle are removed.
func New(ctx context.Context, cfg Config) (*Runtime, error) {
	if cfg.RunscPath == "" || cfg.StateDir == "" || cfg.Net == nil {
		return nil, fmt.Errorf("gvisor: RunscPath, StateDir and Net are required: %w", errdefs.ErrInvalidArgument)
	}
	if _, err := os.Stat(cfg.RunscPath); err != nil {
		return nil, fmt.Errorf("gvisor: runsc: %w", err)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	cfg.Defaults = withDefaults(cfg.Defaults, runtime.Resources{CPUCount: 1, MemoryMB: 512, PidsMax: 1024})
	if cfg.CgroupParent == "" {
		cfg.CgroupParent = "forkbox"
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = time.Minute
	}
	r := &Runtime{cfg: cfg, log: cfg.Logger}
	r.onDemand = !cfg.EagerRestore && r.runscRestoresOnDemand(ctx)
	r.holdGC = !cfg.CollectDuringRestore && r.runscHoldsGC(ctx)
	r.log.InfoContext(ctx, "gvisor restores", "on_demand", r.onDemand, "hold_gc", r.holdGC)
	r.standby = newStandby(r, cfg.Standby)
	for _, dir := range []string{r.runscRoot(), filepath.Join(cfg.StateDir, "sandboxes"), r.containersDir(), r.panicDir()} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("gvisor: %w", err)
		}
	}
	return r, r.reattach(ctx)
}

// Name implements runtime.Runtime.
func (r *Runtime) Name() string { return "gvisor" }

// reattach drops networks and containers no handle accounts for, and the
// standby containers of an earlier daemon (they are cheap to make again).
func (r *Runtime) reattach(ctx context.Context) error {
	known, err := r.knownContainers(ctx)
	if err != nil {
		return err
	}
	if _, err := r.cfg.Net.Recover(ctx, func(id string) bool { return known[id] }); err != nil {
		return err
	}
	states, err := r.runscList(ctx)
	if err != nil {
		return err
	}
	for id := range states {
		if !known[id] {
			r.log.InfoContext(ctx, "removing leftover runsc container", "id", id)
			r.destroy(ctx, id)
		}
	}
	r.killOrphans(ctx, known)
	r.detachUnknownVolumes(known)
	return r.removeUnusedBundles(ctx, known)
}

// detachUnknownVolumes removes the volume attach directories of containers
// no handle accounts for: those of sandbox directories without a handle
// and of an earlier daemon's standby containers, and those a daemon killed
// between replacing a sandbox's container (a rollback) and removing the
// old one left, which nothing else names any more.
func (r *Runtime) detachUnknownVolumes(known map[string]bool) {
	entries, _ := os.ReadDir(filepath.Join(r.cfg.StateDir, "volumes"))
	for _, e := range entries {
		if !known[e.Name()] {
			r.detachVolumes(e.Name())
		}
	}
}

// knownContainers returns the container id of every sandbox with a
// handle, and removes sandbox directories without one: a daemon that died
// between making one and saving its handle left them, and nothing else
// refers to them.
func (r *Runtime) knownContainers(ctx context.Context) (map[string]bool, error) {
	dir := filepath.Join(r.cfg.StateDir, "sandboxes")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("gvisor: %w", err)
	}
	known := map[string]bool{}
	for _, e := range entries {
		h, err := r.loadHandle(e.Name())
		switch {
		case err == nil:
			known[h.cid()] = true
		case errdefs.IsNotFound(err):
			r.log.InfoContext(ctx, "removing sandbox directory without a handle", "id", e.Name())
			r.removeCgroups(ctx, e.Name()) // its volumes: detachUnknownVolumes
			if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
				return nil, fmt.Errorf("gvisor: %w", err)
			}
		}
	}
	return known, nil
}

// Create implements runtime.Runtime.
func (r *Runtime) Create(ctx context.Context, spec runtime.Spec) (runtime.Info, error) {
	return r.create(ctx, spec, nil)
}

// create is Create; tweak, if set, may change the bundle before runsc
// reads it and return global flags for runsc create (CreateFromFilesystem).
func (r *Runtime) create(ctx context.Context, spec runtime.Spec, tweak func(bundle string) ([]string, error)) (info runtime.Info, err error) {
	if err := validate(spec); err != nil {
		return runtime.Info{}, err
	}
	cl := cleanup.New(r.log)
	defer func() {
		if err != nil {
			cl.Run(ctx)
		}
	}()
	h, err := r.prepare(ctx, spec, cl)
	if err != nil {
		return runtime.Info{}, err
	}
	dir := r.sandboxDir(spec.ID)
	var flags []string
	if tweak != nil {
		if flags, err = tweak(dir); err != nil {
			return runtime.Info{}, err
		}
	}
	cl.Add("runsc delete", func(ctx context.Context) error { r.destroy(ctx, spec.ID); return nil })
	if err := r.runDetached(ctx, r.cfg.Timeout, filepath.Join(dir, "runsc.log"),
		append(flags, "create", "--bundle="+dir, "--pid-file="+pidFile(dir), spec.ID)...); err != nil {
		return runtime.Info{}, err
	}
	r.noteSupervisor(spec.ID, dir)
	if err := r.raiseMemoryLimit(spec.ID, h.Resources); err != nil {
		return runtime.Info{}, err
	}
	if _, err := r.run(ctx, r.cfg.Timeout, "start", spec.ID); err != nil {
		return runtime.Info{}, err
	}
	cl.Disarm()
	return startedInfo(h), nil
}

// startedInfo describes a sandbox runsc has just started, without asking
// runsc again: a `runsc state` costs 20–30 ms on the create path.
func startedInfo(h handle) runtime.Info {
	return runtime.Info{ID: h.ID, Addr: h.Addr, CreatedAt: h.CreatedAt, State: runtime.StateRunning}
}

// prepare makes the sandbox directory, network, bundle and handle, pushing
// their undo steps on cl. It returns the handle.
func (r *Runtime) prepare(ctx context.Context, spec runtime.Spec, cl *cleanup.Stack) (handle, error) {
	dir := r.sandboxDir(spec.ID)
	if err := os.Mkdir(dir, 0o700); errors.Is(err, os.ErrExist) {
		return handle{}, fmt.Errorf("sandbox %s: %w", spec.ID, errdefs.ErrAlreadyExists)
	} else if err != nil {
		return handle{}, fmt.Errorf("create %s: %w", dir, err)
	}
	cl.Add("remove bundle", func(context.Context) error { return os.RemoveAll(dir) })
	lease, err := r.cfg.Net.Allocate(ctx, spec.ID, spec.AllowInternet)
	if err != nil {
		return handle{}, err
	}
	cl.Add("release network", func(ctx context.Context) error { return r.cfg.Net.Release(ctx, spec.ID) })
	if err := r.applyEgress(ctx, spec.ID, spec); err != nil {
		return handle{}, err
	}
	h := newHandle(spec, withDefaults(spec.Resources, r.cfg.Defaults), lease)
	return h, r.writeBundle(spec, h, dir)
}

// newHandle describes sandbox spec in the network of lease.
func newHandle(spec runtime.Spec, res runtime.Resources, lease netns.Lease) handle {
	return handle{
		ID: spec.ID, Slot: lease.Slot, Addr: lease.Addr, RootFS: spec.RootFS,
		AllowInternet: spec.AllowInternet, Resources: res, CreatedAt: time.Now().UTC(),
	}
}

// writeBundle writes the OCI config of spec for container h.cid() into
// dir, then h itself.
func (r *Runtime) writeBundle(spec runtime.Spec, h handle, dir string) error {
	lease, ok := r.cfg.Net.Get(h.cid())
	if !ok {
		return fmt.Errorf("network of %s: %w", h.cid(), errdefs.ErrNotFound)
	}
	vdir, err := r.attachVolumes(h.cid(), spec.RootFS, spec.Volumes)
	if err != nil {
		return err
	}
	oci := buildSpec(spec, h.Resources, lease, r.cgroupsPath(h.cid()), r.pinCPUs(h.Resources), vdir)
	if err := writeJSON(filepath.Join(dir, "config.json"), oci); err != nil {
		return err
	}
	return r.saveHandle(h)
}

// Delete implements runtime.Runtime.
func (r *Runtime) Delete(ctx context.Context, id string) error {
	h, err := r.loadHandle(id)
	if err != nil {
		return err
	}
	ctx = context.WithoutCancel(ctx) // half a delete is worse than a slow one
	if err := r.removeContainer(ctx, h.cid(), h.Bundle); err != nil {
		return fmt.Errorf("delete %s: %w", id, err) // the handle stays for a retry
	}
	if err := os.RemoveAll(r.sandboxDir(id)); err != nil {
		return fmt.Errorf("remove bundle of %s: %w", id, err)
	}
	return nil
}

// removeContainer removes runsc container cid with its cgroups, its
// network and, if given, its bundle directory. It goes on past a failed
// step and reports every failure.
func (r *Runtime) removeContainer(ctx context.Context, cid, bundle string) error {
	r.destroy(ctx, cid)
	r.supervisors.Delete(cid)
	var errs []error
	if err := r.cfg.Net.Release(ctx, cid); err != nil && !errdefs.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("release network of %s: %w", cid, err))
	}
	if bundle != "" {
		if err := os.RemoveAll(bundle); err != nil {
			errs = append(errs, fmt.Errorf("remove bundle of %s: %w", cid, err))
		}
	}
	return errors.Join(errs...)
}

// destroy force-deletes runsc container id, if any, and its cgroups.
func (r *Runtime) destroy(ctx context.Context, id string) {
	if _, err := r.run(ctx, r.cfg.Timeout/5, "delete", "--force", id); err != nil && !errdefs.IsNotFound(err) {
		r.log.WarnContext(ctx, "runsc delete failed", "id", id, "err", err)
	}
	// A `runsc create` or `restore` that died (timeout, a killed daemon)
	// before saving runsc's state leaves a sandbox and gofer runsc delete
	// cannot see (and, with --force, reports no error for); they hold the
	// cgroups too.
	r.killProcesses(ctx, func(cid string) bool { return cid == id })
	r.removeCgroups(ctx, id)
	if err := r.detachVolumes(id); err != nil {
		r.log.WarnContext(ctx, "detach volumes", "id", id, "err", err)
	}
	if err := os.Remove(r.panicLog(id)); err != nil && !errors.Is(err, os.ErrNotExist) {
		r.log.WarnContext(ctx, "remove crash report", "id", id, "err", err)
	}
}

// Info implements runtime.Runtime.
func (r *Runtime) Info(ctx context.Context, id string) (runtime.Info, error) {
	h, err := r.loadHandle(id)
	if err != nil {
		return runtime.Info{}, err
	}
	return r.info(ctx, h)
}

// info combines h with runsc's view of the container.
func (r *Runtime) info(ctx context.Context, h handle) (runtime.Info, error) {
	st, err := r.runscState(ctx, h.cid())
	if err != nil {
		return runtime.Info{}, err
	}
	return toInfo(h, st), nil
}

// List implements runtime.Runtime.
func (r *Runtime) List(ctx context.Context) ([]runtime.Info, error) {
	entries, err := os.ReadDir(filepath.Join(r.cfg.StateDir, "sandboxes"))
	if err != nil {
		return nil, fmt.Errorf("list sandboxes: %w", err)
	}
	states, err := r.runscList(ctx)
	if err != nil {
		return nil, err
	}
	var out []runtime.Info
	for _, e := range entries {
		h, err := r.loadHandle(e.Name())
		if err != nil {
			continue // being created or deleted right now
		}
		out = append(out, toInfo(h, states[h.cid()]))
	}
	return out, nil
}

// Dial implements runtime.Runtime.
func (r *Runtime) Dial(ctx context.Context, id string, port int) (net.Conn, error) {
	h, err := r.loadHandle(id)
	if err != nil {
		return nil, err
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp4", netip.AddrPortFrom(h.Addr, uint16(port)).String())
	if err != nil {
		return nil, fmt.Errorf("dial %s port %d: %v: %w", id, port, err, errdefs.ErrUnavailable)
	}
	return c, nil
}

// Freeze implements runtime.Runtime.
func (r *Runtime) Freeze(ctx context.Context, id string) error {
	return r.simple(ctx, id, "pause")
}

// Thaw implements runtime.Runtime.
func (r *Runtime) Thaw(ctx context.Context, id string) error {
	return r.simple(ctx, id, "resume")
}

// simple runs a one-argument runsc verb on a known sandbox.
func (r *Runtime) simple(ctx context.Context, id, verb string) error {
	h, err := r.loadHandle(id)
	if err != nil {
		return err
	}
	_, err = r.run(ctx, r.cfg.Timeout/5, verb, h.cid())
	return err
}

// cgroupsPath is the OCI cgroupsPath of container id.
func (r *Runtime) cgroupsPath(id string) string {
	return "/" + r.cfg.CgroupParent + "/" + id
}

// validate checks a spec before anything touches the host.
func validate(s runtime.Spec) error {
	if err := runtime.ValidateID(s.ID); err != nil {
		return err
	}
	if len(s.Args) == 0 {
		return fmt.Errorf("sandbox %s: no args: %w", s.ID, errdefs.ErrInvalidArgument)
	}
	if fi, err := os.Stat(s.RootFS); err != nil || !fi.IsDir() {
		return fmt.Errorf("sandbox %s: rootfs %q is not a directory: %w", s.ID, s.RootFS, errdefs.ErrInvalidArgument)
	}
	return nil
}
