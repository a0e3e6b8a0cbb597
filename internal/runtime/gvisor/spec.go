package gvisor

import (
	"os"
	"path/filepath"
	"slices"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/forkbox/forkbox/internal/netns"
	"github.com/forkbox/forkbox/internal/runtime"
)

const mib = 1 << 20

// Headroom of the host's limits over the sandbox's own: the sentry, gofer
// and systrap stub threads are charged to the sandbox's cgroups too, and
// hitting a host limit kills the whole sandbox (trap 7). Inside, the
// sandbox meets its own limits first (limits.go).
const (
	memoryHeadroomMiB = 128 // plus a quarter of the requested memory
	pidsHeadroom      = 256 // plus the requested pids thrice (two uids, stub threads)
	cpuPeriodUs       = 100000
)

// defaultCaps are the capabilities of the first process: Docker's default
// set, so the agent can run as root inside the sandbox's own kernel, and
// CAP_SYS_RESOURCE, with which the agent's out-of-memory guard lowers the
// address-space limit of any user's process (oomguard). The agent drops
// it from its bounding set at once, so nothing it starts has it: a root
// process with it would escape RLIMIT_NPROC.
var defaultCaps = []string{
	"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FSETID", "CAP_FOWNER", "CAP_MKNOD",
	"CAP_NET_RAW", "CAP_SETGID", "CAP_SETUID", "CAP_SETFCAP", "CAP_SETPCAP",
	"CAP_NET_BIND_SERVICE", "CAP_SYS_CHROOT", "CAP_KILL", "CAP_AUDIT_WRITE",
	"CAP_SYS_RESOURCE",
}

// withDefaults fills zero resources from def.
func withDefaults(r, def runtime.Resources) runtime.Resources {
	if r.CPUCount <= 0 {
		r.CPUCount = def.CPUCount
	}
	if r.MemoryMB <= 0 {
		r.MemoryMB = def.MemoryMB
	}
	if r.PidsMax <= 0 {
		r.PidsMax = def.PidsMax
	}
	return r
}

// memoryLimit is the host cgroup memory limit of a sandbox of res, set
// once runsc has read the spec's (raiseMemoryLimit): its processes' memory
// with headroom for the sentry; half a MiB per task, what the host pays
// for each guest process beyond its memory (its systrap stub: 1023 `sleep`s
// took 572 MiB on the host and 145 MiB inside); and its files, which the
// memory-backed overlay keeps in memory too (/ with /tmp: DiskMB).
func memoryLimit(res runtime.Resources) int64 {
	return int64(res.MemoryMB+res.MemoryMB/4+memoryHeadroomMiB+res.PidsMax/2+res.DiskMB) * mib
}

// hostPidsLimit is the host pids cgroup limit for a sandbox of res: every
// uid inside may have PidsMax tasks (RLIMIT_NPROC), and root and the
// default user each get theirs.
func hostPidsLimit(res runtime.Resources) int64 {
	return int64(res.PidsMax*3 + pidsHeadroom)
}

// buildSpec returns the OCI spec of a sandbox; cpus is its cpuset ("" for
// all CPUs, see pinCPUs). Create and Restore build it the same way from
// the same inputs, so the mounts of a restore equal the checkpoint's (trap
// 9); the cpuset is a resource, which a restore may change.
//
// volumesDir is the container's volume attach directory (volumes.go).
func buildSpec(s runtime.Spec, res runtime.Resources, lease netns.Lease, cgroupsPath, cpus, volumesDir string) *specs.Spec {
	env := s.Env
	if !hasEnv(env, "PATH") {
		env = append([]string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}, env...)
	}
	caps := defaultCaps
	if s.Admin {
		caps = append(slices.Clone(defaultCaps), "CAP_SYS_ADMIN")
	}
	// runsc gives the sentry the cgroup's memory limit as the sandbox's
	// MemTotal: the spec says MemoryMB, raiseMemoryLimit adds the headroom
	// after runsc has read it.
	memLimit := int64(res.MemoryMB) * mib
	quota := int64(res.CPUCount) * cpuPeriodUs
	period := uint64(cpuPeriodUs)
	pids := hostPidsLimit(res)
	return &specs.Spec{
		Version: specs.Version,
		Process: &specs.Process{
			Terminal: false,
			User:     specs.User{UID: 0, GID: 0},
			Args:     s.Args,
			Env:      env,
			Cwd:      "/",
			Capabilities: &specs.LinuxCapabilities{
				Bounding: caps, Effective: caps, Permitted: caps,
			},
			Rlimits: rlimits(res),
		},
		Root:        &specs.Root{Path: s.RootFS, Readonly: false},
		Hostname:    s.Hostname,
		Annotations: rootfsAnnotations(s.RootFS, res),
		Mounts:      append(append(mounts(s.RootFS), volumeMount(volumesDir)), binds(s.Mounts)...),
		Linux: &specs.Linux{
			CgroupsPath: cgroupsPath,
			Resources: &specs.LinuxResources{
				Memory: &specs.LinuxMemory{Limit: &memLimit},
				CPU:    &specs.LinuxCPU{Quota: &quota, Period: &period, Cpus: cpus},
				Pids:   &specs.LinuxPids{Limit: pids},
			},
			Namespaces: []specs.LinuxNamespace{
				{Type: specs.NetworkNamespace, Path: lease.NSPath},
				{Type: specs.PIDNamespace},
				{Type: specs.IPCNamespace},
				{Type: specs.UTSNamespace},
				{Type: specs.MountNamespace},
			},
		},
	}
}

// mounts returns the sandbox-internal mounts whose mount points exist in
// rootfs, and x11Mount below an existing /tmp: the sentry makes that mount
// point in the root overlay's memory. A missing mount point of a host
// directory would be created by the gofer in the shared host rootfs (trap
// 3); the others are skipped too, so every sandbox of a rootfs has the
// same mounts.
func mounts(rootfs string) []specs.Mount {
	all := []specs.Mount{
		{Destination: "/proc", Type: "proc", Source: "proc"},
		{Destination: "/dev", Type: "tmpfs", Source: "tmpfs"},
		{Destination: "/sys", Type: "sysfs", Source: "sysfs", Options: []string{"nosuid", "noexec", "nodev", "ro"}},
	}
	var out []specs.Mount
	for _, m := range all {
		if isDir(filepath.Join(rootfs, m.Destination)) {
			out = append(out, m)
		}
	}
	if m, ok := x11Mount(rootfs); ok && isDir(filepath.Join(rootfs, "tmp")) {
		out = append(out, m)
	}
	return out
}

// isDir reports whether path is a directory (following symlinks).
func isDir(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}

// binds are the spec's bind mounts of host directories (read-write).
func binds(ms []runtime.Mount) []specs.Mount {
	var out []specs.Mount
	for _, m := range ms {
		out = append(out, specs.Mount{Destination: m.Destination, Type: "bind", Source: m.Source, Options: []string{"rbind", "rw"}})
	}
	return out
}

// hasEnv reports whether env sets key.
func hasEnv(env []string, key string) bool {
	for _, kv := range env {
		if strings.HasPrefix(kv, key+"=") {
			return true
		}
	}
	return false
}
