package gvisor

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/runtime"
)

var _ runtime.Waiter = (*Runtime)(nil)

// Wait implements runtime.Waiter. It waits on a pidfd of the sandbox's
// supervisor (runsc's sandbox process, the sentry), which becomes readable
// the moment that process exits, then reads the sandbox's cgroups and log
// to tell why.
func (r *Runtime) Wait(ctx context.Context, id string) (runtime.Exit, error) {
	h, err := r.loadHandle(id)
	if err != nil {
		return runtime.Exit{}, err
	}
	pid, err := r.supervisorPid(ctx, id, h.cid())
	if err != nil {
		return runtime.Exit{}, err
	}
	before := r.exitCounters(h)
	if err := waitPid(ctx, pid); err != nil {
		return runtime.Exit{}, err
	}
	return r.classifyExit(h, before), nil
}

// Stopped implements runtime.Waiter. Nothing was counted before, so
// every OOM kill and refused fork the sandbox's cgroups ever saw, and every
// fatal line of its log, counts: the container's cgroups and log are its
// own, from its create or restore on.
func (r *Runtime) Stopped(ctx context.Context, id string) (runtime.Exit, error) {
	h, err := r.loadHandle(id)
	if err != nil {
		return runtime.Exit{}, err
	}
	if _, err := r.supervisorPid(ctx, id, h.cid()); err == nil {
		return runtime.Exit{}, fmt.Errorf("sandbox %s is running: %w", id, errdefs.ErrConflict)
	} else if !errdefs.IsConflict(err) {
		return runtime.Exit{}, err
	}
	return r.classifyExit(h, exitCounters{}), nil
}

// supervisorPid is the pid of container cid's sandbox process. A wait
// that follows another on the same process (a pooled sandbox handed over
// to a create) takes it from the earlier one: a `runsc state` is a process
// start that, just after a create, competed with the sandbox's first
// command for the CPUs. The process must still be the one seen then (same
// start time); else, as at the first wait, runsc says.
func (r *Runtime) supervisorPid(ctx context.Context, id, cid string) (int, error) {
	if v, ok := r.supervisors.Load(cid); ok {
		sp := v.(supervisor)
		if start, err := procStart(sp.pid); err == nil && start == sp.start {
			return sp.pid, nil
		}
		r.supervisors.CompareAndDelete(cid, v)
	}
	st, err := r.runscState(ctx, cid)
	if err != nil {
		return 0, err
	}
	if (st.Status != "running" && st.Status != "paused") || st.Pid <= 0 {
		return 0, fmt.Errorf("sandbox %s is %s: %w", id, st.Status, errdefs.ErrConflict)
	}
	if start, err := procStart(st.Pid); err == nil {
		r.supervisors.Store(cid, supervisor{pid: st.Pid, start: start})
	}
	return st.Pid, nil
}

// supervisor is a sandbox process as Wait saw it: its pid and its start
// time (which tells it from a later process given the same pid).
type supervisor struct {
	pid   int
	start string
}

// procStart is process pid's start time in clock ticks since boot (field
// 22 of /proc/<pid>/stat); a zombie counts as gone.
func procStart(pid int) (string, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", err
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return "", fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(b[i+1:])) // f[0] is field 3, the state
	if len(f) < 20 || f[0] == "Z" || f[0] == "X" {
		return "", fmt.Errorf("process %d is gone", pid)
	}
	return f[19], nil
}

// waitPid blocks until process pid exits or ctx ends. A pidfd opened
// non-blocking is pollable, so the wait sits in Go's netpoller and a
// deadline ends it.
func waitPid(ctx context.Context, pid int) error {
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if errors.Is(err, unix.ESRCH) {
		return nil // gone already
	}
	if err != nil {
		return fmt.Errorf("pidfd_open %d: %w", pid, err)
	}
	f := os.NewFile(uintptr(fd), "pidfd")
	defer f.Close()
	stop := context.AfterFunc(ctx, func() { f.SetReadDeadline(time.Now()) })
	defer stop()
	rc, err := f.SyscallConn()
	if err != nil {
		return fmt.Errorf("pidfd %d: %w", pid, err)
	}
	err = rc.Read(func(fd uintptr) bool {
		n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, 0)
		return err == nil && n > 0
	})
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err != nil {
		return fmt.Errorf("wait for pid %d: %w", pid, err)
	}
	return nil
}

// exitCounters are the cgroup event counts that tell a limit kill: the
// kernel's OOM kills in the memory cgroup and refused forks in the pids
// cgroup. Wait compares them before and after.
type exitCounters struct {
	oomKills, pidsMax uint64
	logSize           int64
}

// exitCounters reads h's counters now (zero where unreadable).
func (r *Runtime) exitCounters(h handle) exitCounters {
	rel := r.cgroupsPath(h.cid())
	var c exitCounters
	c.oomKills, _ = readKeyed(filepath.Join(cgroupRoot, "memory", rel, "memory.oom_control"), "oom_kill")
	c.pidsMax, _ = readKeyed(filepath.Join(cgroupRoot, "pids", rel, "pids.events"), "max")
	if fi, err := os.Stat(r.logPath(h)); err == nil {
		c.logSize = fi.Size()
	}
	return c
}

// classifyExit tells why h's supervisor exited, from what changed since
// before: an OOM kill, a refused fork (the sentry cannot survive one), a
// fatal line in runsc's log, or else a kill from outside.
func (r *Runtime) classifyExit(h handle, before exitCounters) runtime.Exit {
	after := r.exitCounters(h)
	ex := runtime.Exit{Reason: runtime.ExitKilled, At: time.Now(), Detail: "the sandbox's supervisor was killed"}
	switch {
	case after.oomKills > before.oomKills:
		ex.Reason = runtime.ExitOutOfMemory
		ex.Detail = fmt.Sprintf("the host's memory limit of the sandbox (%d MiB) was hit", memoryLimit(h.Resources)/mib)
	case after.pidsMax > before.pidsMax:
		ex.Reason = runtime.ExitProcessLimit
		ex.Detail = fmt.Sprintf("the host's task limit of the sandbox (%d) was hit", hostPidsLimit(h.Resources))
	default:
		if line := crashLine(r.panicLog(h.cid())); line != "" {
			ex.Reason, ex.Detail = runtime.ExitCrashed, "the sandbox's supervisor crashed: "+line
		} else if line := fatalLine(r.logPath(h), before.logSize); line != "" {
			ex.Reason, ex.Detail = runtime.ExitCrashed, line
		}
	}
	return ex
}

// panicDir holds the sentries' crash reports (runsc --panic-log).
func (r *Runtime) panicDir() string { return filepath.Join(r.cfg.StateDir, "panic") }

// panicLog is the crash report file of container cid.
func (r *Runtime) panicLog(cid string) string { return filepath.Join(r.panicDir(), cid+".log") }

// crashMark matches the first line of a Go crash report: a panic, a fatal
// runtime error, or a fatal signal (SIGSEGV: segmentation violation, …).
var crashMark = regexp.MustCompile(`^(panic: |fatal error: |SIG[A-Z]+: )`)

// crashLine returns the first line of the crash report in path, if any.
func crashLine(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if line := sc.Text(); crashMark.MatchString(line) {
			return line[:min(len(line), 300)]
		}
	}
	return ""
}

// logPath is runsc's log of the container that runs h (its create or
// restore wrote it).
func (r *Runtime) logPath(h handle) string {
	dir := h.Bundle
	if dir == "" {
		dir = r.sandboxDir(h.ID)
	}
	return filepath.Join(dir, "runsc.log")
}

// readKeyed returns the value of key in a cgroup file of "key value" lines.
func readKeyed(path, key string) (uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), " ")
		if ok && k == key {
			return strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		}
	}
	return 0, fmt.Errorf("%s: no %q", path, key)
}

// fatalLine returns the first panic or fatal line runsc logged past offset.
func fatalLine(path string, offset int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return ""
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.Contains(line, "panic:") || strings.Contains(line, "FATAL ERROR") ||
			strings.Contains(line, "fatal error:") {
			if len(line) > 300 {
				line = line[:300]
			}
			return line
		}
	}
	return ""
}

// pidFile is where runsc writes the sandbox process's pid when it creates
// the container of bundle (runsc create/restore --pid-file).
func pidFile(bundle string) string { return filepath.Join(bundle, "sandbox.pid") }

// noteSupervisor remembers the sandbox process runsc wrote to bundle's pid
// file for container cid, so that the first Wait need not ask `runsc state`
// for it: a runsc process start (~10 ms of CPU) beside the sandbox's first
// command, ten of them after a clone of ten. A pid file that is missing or
// names another process than cid's sandbox is ignored; Wait then asks
// runsc as before.
func (r *Runtime) noteSupervisor(cid, bundle string) {
	b, err := os.ReadFile(pidFile(bundle))
	if err != nil {
		return
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return
	}
	// runsc-sandbox's argv ends with the container id.
	cmd, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil || !strings.HasPrefix(string(cmd), "runsc-sandbox\x00") || !strings.HasSuffix(string(cmd), "\x00"+cid+"\x00") {
		return
	}
	if start, err := procStart(pid); err == nil {
		r.supervisors.Store(cid, supervisor{pid: pid, start: start})
	}
}
