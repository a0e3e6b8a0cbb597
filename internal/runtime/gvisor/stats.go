package gvisor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/runtime"
)

// cgroupRoot is where the v1 controllers are mounted.
const cgroupRoot = "/sys/fs/cgroup"

// cgroupControllers are the v1 hierarchies runsc creates a sandbox's cgroup
// in; Delete removes leftovers from each.
var cgroupControllers = []string{
	"blkio", "cpu", "cpuacct", "cpuset", "devices", "freezer", "memory", "net_cls",
	"net_prio", "perf_event", "pids", "hugetlb", "rdma", "misc", "systemd",
}

// Stats implements runtime.Runtime by reading the sandbox's cgroups, which
// account for everything the sandbox costs the host (sentry, gofer, guest
// memory). A sandbox that is not running has no cgroup: ErrConflict.
func (r *Runtime) Stats(ctx context.Context, id string) (runtime.Stats, error) {
	h, err := r.loadHandle(id)
	if err != nil {
		return runtime.Stats{}, err
	}
	rel := r.cgroupsPath(h.cid())
	mem, err := readUint(filepath.Join(cgroupRoot, "memory", rel, "memory.usage_in_bytes"))
	if errors.Is(err, os.ErrNotExist) {
		return runtime.Stats{}, fmt.Errorf("sandbox %s has no cgroup (not running): %w", id, errdefs.ErrConflict)
	}
	if err != nil {
		return runtime.Stats{}, err
	}
	limit, err := readUint(filepath.Join(cgroupRoot, "memory", rel, "memory.limit_in_bytes"))
	if err != nil {
		return runtime.Stats{}, err
	}
	cpu, err := readUint(filepath.Join(cgroupRoot, "cpuacct", rel, "cpuacct.usage"))
	if err != nil {
		return runtime.Stats{}, err
	}
	pids, err := readUint(filepath.Join(cgroupRoot, "pids", rel, "pids.current"))
	if err != nil {
		return runtime.Stats{}, err
	}
	return runtime.Stats{
		CPUUsage:         time.Duration(cpu),
		MemoryBytes:      mem,
		MemoryLimitBytes: limit,
		Pids:             int(pids),
	}, nil
}

// removeCgroups removes the cgroup directories of container id that runsc left (it
// does when the sandbox died instead of being deleted). Missing ones are
// fine; a cgroup that still has tasks cannot be removed and is logged.
func (r *Runtime) removeCgroups(ctx context.Context, id string) {
	rel := r.cgroupsPath(id)
	for _, c := range cgroupControllers {
		dir := filepath.Join(cgroupRoot, c, rel)
		if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
			r.log.WarnContext(ctx, "remove cgroup", "dir", dir, "err", err)
		}
	}
}

// readUint reads a cgroup file holding one unsigned number.
func readUint(path string) (uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", path, err)
	}
	v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parse %s: %v: %w", path, err, errdefs.ErrInternal)
	}
	return v, nil
}
