package gvisor

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/forkbox/forkbox/internal/runtime"
)

// A sandbox fails like a small machine, not like a crashed box: each limit
// is met inside the sandbox before the host's cgroup limit behind it,
// which kills the whole sentry (trap 7), is reached.
//
//   - Tasks: RLIMIT_NPROC = PidsMax. gVisor counts every uid's tasks
//     against it (root here lacks CAP_SYS_RESOURCE), so a fork bomb gets
//     EAGAIN inside; the host pids limit allows three times as many.
//   - Files: the root overlay's upper layer is a tmpfs of DiskMB
//     (`dev.gvisor.spec.rootfs.options: size=…`) and so is an empty /tmp
//     (a sized /tmp mount; a /tmp with files is the overlay's), so writes
//     past it get ENOSPC. Both live in the sandbox's memory.
//   - Memory: the sentry reports MemTotal = MemoryMB (runsc passes the
//     cgroup's limit at create as --total-memory), but gVisor kills nothing
//     when it runs out: the agent's out-of-memory guard does
//     (internal/guest/oomguard). The host limit, raised after create to
//     memoryLimit, leaves the sentry its headroom.
//
// Restores keep what the checkpoint was made with — the rlimit, the file
// sizes and the CPU count (gVisor saves them in the kernel's state; runsc
// refuses a restore whose mounts or rlimits differ) — while MemTotal is
// the restoring container's.

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

// tmpMount is /tmp as a tmpfs of DiskMB where rootfs's /tmp is empty:
// without a /tmp mount runsc mounts one of half the host's memory over an
// empty /tmp. A /tmp with files (a user template whose build wrote there)
// stays part of the root overlay, which is sized too, so the files the
// build left are seen and writes still meet ENOSPC.
func tmpMount(rootfs string, res runtime.Resources) (specs.Mount, bool) {
	if res.DiskMB <= 0 {
		return specs.Mount{}, false
	}
	if ents, err := os.ReadDir(filepath.Join(rootfs, "tmp")); err != nil || len(ents) > 0 {
		return specs.Mount{}, false
	}
	return specs.Mount{Destination: "/tmp", Type: "tmpfs", Source: "tmpfs",
		Options: []string{"mode=1777", "size=" + strconv.Itoa(res.DiskMB) + "m"}}, true
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
