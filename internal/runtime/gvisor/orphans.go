package gvisor

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// killOrphans kills the runsc processes under this runtime's --root that
// belong to no known container: the sandbox and gofer of a container whose
// `runsc create` a killed daemon left half done — runsc saved no state for
// it, so `runsc list` could not show it — and such a create itself. Their
// runsc state, if the create saved it meanwhile, and cgroups go too.
func (r *Runtime) killOrphans(ctx context.Context, known map[string]bool) {
	killed := r.killProcesses(ctx, func(cid string) bool { return !known[cid] })
	for cid := range killed {
		// The create may have saved runsc's state before it died.
		r.destroy(ctx, cid)
	}
}

// killProcesses SIGKILLs the processes started with this runtime's --root
// whose bundle's container matches, waits for them to exit, and returns
// them by container.
func (r *Runtime) killProcesses(ctx context.Context, match func(cid string) bool) map[string][]int {
	killed := map[string][]int{}
	for pid, p := range RunscProcesses(r.runscRoot()) {
		if !match(p.Container) {
			continue
		}
		r.log.InfoContext(ctx, "killing leftover runsc process", "pid", pid, "container", p.Container, "process", p.Argv0)
		syscall.Kill(pid, syscall.SIGKILL)
		killed[p.Container] = append(killed[p.Container], pid)
	}
	for _, pids := range killed {
		waitGone(pids, 2*time.Second)
	}
	return killed
}

// RunscProcess is a process started with a runsc --root and --bundle: a
// sandbox, a gofer, or a runsc command working on the container.
type RunscProcess struct {
	Container string // the last element of its --bundle directory
	Argv0     string
}

// RunscProcesses maps the pid of every process (but this one) started
// with --root=root and a --bundle to what it is. Tests use it to find
// what a runtime left on the host.
func RunscProcesses(root string) map[int]RunscProcess {
	rootArg := "--root=" + root
	ents, _ := os.ReadDir("/proc")
	out := map[int]RunscProcess{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		if !slices.Contains(args, rootArg) {
			continue
		}
		if cid := bundleContainer(args); cid != "" {
			out[pid] = RunscProcess{Container: cid, Argv0: args[0]}
		}
	}
	return out
}

// SentryPid returns the pid of container cid's runsc sandbox process (the
// sentry) under --root=root, 0 if there is none. Tests and benchmarks kill
// it to make a sandbox die from outside.
func SentryPid(root, cid string) int {
	for pid, p := range RunscProcesses(root) {
		if p.Container == cid && p.Argv0 == "runsc-sandbox" {
			return pid
		}
	}
	return 0
}

// bundleContainer returns the container a runsc command line is for: the
// last element of its --bundle directory (containers/<cid>, or
// sandboxes/<id> where the container has the sandbox's id).
func bundleContainer(args []string) string {
	for i, a := range args {
		if v, ok := strings.CutPrefix(a, "--bundle="); ok {
			return filepath.Base(v)
		}
		if a == "--bundle" && i+1 < len(args) {
			return filepath.Base(args[i+1])
		}
	}
	return ""
}

// waitGone waits until every pid has exited, or timeout.
func waitGone(pids []int, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for _, pid := range pids {
		for time.Now().Before(deadline) {
			if err := syscall.Kill(pid, 0); err != nil {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}
