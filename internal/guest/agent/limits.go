package agent

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
)

// childTasks is the RLIMIT_NPROC soft limit the processes the agent starts
// get back (0: leave them the agent's). gVisor counts a uid's tasks
// against the limit of the task that forks, threads included: a fork bomb
// run as root would otherwise leave the agent, root too, unable to start a
// thread, and the Go runtime dies of that.
var childTasks atomic.Uint64

// ReserveTasks lets the agent itself use RLIMIT_NPROC's hard limit (the
// runtime sets it a little above the soft one) and makes every process it
// starts get the soft one back. It is called once, at the agent's start;
// a restored agent keeps its limits.
func ReserveTasks() error {
	var l unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NPROC, &l); err != nil {
		return fmt.Errorf("getrlimit RLIMIT_NPROC: %w", err)
	}
	if l.Cur >= l.Max {
		return nil
	}
	soft := l.Cur
	l.Cur = l.Max
	if err := unix.Setrlimit(unix.RLIMIT_NPROC, &l); err != nil {
		return fmt.Errorf("setrlimit RLIMIT_NPROC: %w", err)
	}
	childTasks.Store(soft)
	return nil
}

// limitChild gives a process the agent started the task limit the agent
// reserved past. A child running as another user cannot be changed without
// CAP_SYS_RESOURCE; it counts against its own uid, not the agent's, and
// keeps the hard limit.
func limitChild(pid int) {
	soft := childTasks.Load()
	if soft == 0 {
		return
	}
	var l unix.Rlimit
	if err := unix.Prlimit(pid, unix.RLIMIT_NPROC, nil, &l); err != nil {
		return
	}
	l.Cur = soft
	_ = unix.Prlimit(pid, unix.RLIMIT_NPROC, &l, nil)
}

// KeepResourceCapability drops CAP_SYS_RESOURCE from the bounding set of
// every thread of the agent, so no process it starts from now on gets it
// (exec computes a root process's capabilities from the bounding set), while
// the agent keeps it: its out-of-memory guard lowers the address-space
// limit of other users' processes with it, and a root process holding it
// would escape RLIMIT_NPROC. It must run before the agent starts anything.
// The bounding set is per thread: every thread drops it, and threads made
// later inherit the drop.
func KeepResourceCapability() error {
	if in, err := unix.PrctlRetInt(unix.PR_CAPBSET_READ, unix.CAP_SYS_RESOURCE, 0, 0, 0); err == nil && in == 0 {
		return nil // not ours to hand out (the agent run elsewhere than as a sandbox's first process)
	}
	_, _, errno := syscall.AllThreadsSyscall(syscall.SYS_PRCTL, unix.PR_CAPBSET_DROP, unix.CAP_SYS_RESOURCE, 0)
	if errno != 0 {
		return fmt.Errorf("drop CAP_SYS_RESOURCE from the bounding set: %w", errno)
	}
	return nil
}

// applyCPUCount makes the agent, and so every process it starts from now
// on, run on the first n CPUs when the sandbox has more: gVisor reports at
// least two CPUs, and a restore keeps its image's count, so `nproc` (the
// affinity mask) is how a sandbox sees the CPU count it was given.
func applyCPUCount(n int) error {
	if n <= 0 {
		return nil
	}
	n = min(n, runtime.NumCPU())
	var set unix.CPUSet
	for i := range n {
		set.Set(i)
	}
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return err
	}
	// The mask is per thread and a child inherits its forking thread's, so
	// every thread of the agent gets it; threads made later inherit it.
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		if err := unix.SchedSetaffinity(tid, &set); err != nil {
			return fmt.Errorf("sched_setaffinity %d: %w", tid, err)
		}
	}
	return nil
}

// cpuMask returns the CPUs the agent's thread may run on, which the
// processes it starts inherit (the zero set when it cannot be read).
func cpuMask() unix.CPUSet {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return unix.CPUSet{}
	}
	return set
}
