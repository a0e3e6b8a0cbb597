package gvisor

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/forkbox/forkbox/internal/runtime"
)

// A sandbox fails like a small machine, not like a crashed box: each limit
// is met inside the sandbox before the host's cgroup limit behind it,
// which kills the whole sentry (trap 7), is reached.
//
//   - Tasks: RLIMIT_NPROC = PidsMax. gVisor counts every uid's tasks
//     against it unless the forking task holds CAP_SYS_RESOURCE (only the
//     agent does: it drops it from the bounding set, so what it starts
//     never has it), so a fork bomb gets EAGAIN inside; the host pids limit
//     allows three times as many.
//   - Files: the root overlay's upper layer is a tmpfs of DiskMB
//     (`dev.gvisor.spec.rootfs.options: size=…`), and /tmp is part of it
//     (x11Mount), so writes to / and /tmp together get ENOSPC past DiskMB,
//     as on a VM's one disk, and `runsc tar rootfs-upper` keeps /tmp too.
//     The files live in the sandbox's memory.
//   - Memory: the sentry reports MemTotal = MemoryMB (runsc passes the
//     cgroup's limit at create as --total-memory), but gVisor kills nothing
//     when it runs out: the agent's out-of-memory guard fails and then
//     kills (internal/guest/oomguard). The host limit, raised after create
//     to memoryLimit, leaves the sentry its headroom.
//   - CPUs: runsc gives the sentry min(the cgroup's cpuset, max(2, the CPU
//     quota)) CPUs at create. A 1-CPU sandbox is pinned to one host CPU
//     (pinCPUs), so it has one CPU and says so; others see their quota.
//
// Restores keep what the checkpoint was made with — the rlimit, the file
// sizes and the CPU count (gVisor saves them in the kernel's state; runsc
// refuses a restore whose mounts, annotations or rlimits differ) — while
// MemTotal is the restoring container's.

// agentTasks is how many tasks past RLIMIT_NPROC's soft limit the agent
// keeps for itself (agent.ReserveTasks): a fork bomb run as root must not
// leave it unable to start a thread.
const agentTasks = 64

// rlimits are the first process's resource limits, inherited by all.
func rlimits(res runtime.Resources) []specs.POSIXRlimit {
	return []specs.POSIXRlimit{
		{Type: "RLIMIT_NOFILE", Hard: 1 << 20, Soft: 1 << 20},
		{Type: "RLIMIT_NPROC", Hard: uint64(res.PidsMax + agentTasks), Soft: uint64(res.PidsMax)},
	}
}

// rootfsAnnotations size the root overlay's memory-backed upper layer to
// DiskMB; none for 0 (gVisor's default size).
func rootfsAnnotations(rootfs string, res runtime.Resources) map[string]string {
	if res.DiskMB <= 0 {
		return nil
	}
	return map[string]string{
		"dev.gvisor.spec.rootfs.source":  rootfs,
		"dev.gvisor.spec.rootfs.type":    "bind",
		"dev.gvisor.spec.rootfs.overlay": "memory",
		"dev.gvisor.spec.rootfs.options": "size=" + strconv.Itoa(res.DiskMB) + "m",
	}
}

// x11Dir is the directory below /tmp a tiny tmpfs is mounted on. runsc
// mounts a tmpfs of half the host's memory over an empty /tmp unless a
// mount says otherwise; a mount inside /tmp makes its mount point, so /tmp
// is no longer empty and stays the root overlay's: sized by DiskMB, shared
// with /, and saved by a filesystem-only pause. X11's socket directory is
// one a Linux machine's /tmp has anyway (systemd-tmpfiles makes it), so the
// mount shows the user nothing unusual.
const x11Dir = "/tmp/.X11-unix"

// x11Mount is the tmpfs on x11Dir, unless rootfs has something there (a
// file, or a directory with entries: then /tmp is not empty either).
func x11Mount(rootfs string) (specs.Mount, bool) {
	p := filepath.Join(rootfs, x11Dir)
	if fi, err := os.Lstat(p); err == nil {
		ents, err := os.ReadDir(p)
		if !fi.IsDir() || err != nil || len(ents) > 0 {
			return specs.Mount{}, false
		}
	}
	return specs.Mount{Destination: x11Dir, Type: "tmpfs", Source: "tmpfs",
		Options: []string{"mode=1777", "size=1m"}}, true
}

// pinCPUs returns the cpuset of a sandbox of res: one host CPU, taken in
// turn, for a 1-CPU sandbox, so runsc gives its sentry one CPU (its quota
// alone would give two, runsc's floor for a CPU count apps may rely on for
// parallelism: a pinned sandbox really runs on one); "" (all) otherwise.
func (r *Runtime) pinCPUs(res runtime.Resources) string {
	if res.CPUCount != 1 {
		return ""
	}
	cpus, err := r.readyCpuset()
	if err != nil || len(cpus) == 0 {
		r.log.Warn("cannot pin a 1-CPU sandbox; it runs on every CPU", "err", err)
		return ""
	}
	return strconv.Itoa(cpus[int(r.nextCPU.Add(1)-1)%len(cpus)])
}

// readyCpuset returns the CPUs sandboxes' cgroups may use, filling the
// cpuset.cpus and cpuset.mems of the cgroups above them from the root's
// first if empty: runsc fills a new cgroup's from its ancestors only when
// the spec names no CPUs, and the kernel refuses a cgroup CPUs its parent
// lacks (EACCES).
func (r *Runtime) readyCpuset() ([]int, error) {
	dir := filepath.Join(cgroupRoot, "cpuset")
	var cpus string
	for _, part := range strings.Split(strings.Trim(r.cfg.CgroupParent, "/"), "/") {
		parent := dir
		dir = filepath.Join(dir, part)
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return nil, err
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			v, err := os.ReadFile(filepath.Join(dir, f))
			if err != nil {
				return nil, err
			}
			if strings.TrimSpace(string(v)) == "" {
				if v, err = os.ReadFile(filepath.Join(parent, f)); err != nil {
					return nil, err
				}
				if err := os.WriteFile(filepath.Join(dir, f), v, 0o644); err != nil {
					return nil, fmt.Errorf("fill %s: %w", filepath.Join(dir, f), err)
				}
			}
			if f == "cpuset.cpus" {
				cpus = strings.TrimSpace(string(v))
			}
		}
	}
	return parseCPUList(cpus)
}

// parseCPUList parses a cpuset list ("0-2,7").
func parseCPUList(s string) ([]int, error) {
	var out []int
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return nil, fmt.Errorf("cpu list %q: %w", s, err)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil {
				return nil, fmt.Errorf("cpu list %q: %w", s, err)
			}
		}
		for c := a; c <= b; c++ {
			out = append(out, c)
		}
	}
	return out, nil
}

// raiseMemoryLimit sets container cid's host memory limit to memoryLimit.
// runsc created its cgroup with the spec's MemoryMB and has passed that to
// the sentry as its total memory; the host limit behind it is only the
// last resort. Called right after every runsc create and restore.
func (r *Runtime) raiseMemoryLimit(cid string, res runtime.Resources) error {
	path := filepath.Join(cgroupRoot, "memory", r.cgroupsPath(cid), "memory.limit_in_bytes")
	if err := os.WriteFile(path, []byte(strconv.FormatInt(memoryLimit(res), 10)), 0o644); err != nil {
		return fmt.Errorf("raise the memory limit of %s: %w", cid, err)
	}
	return nil
}
