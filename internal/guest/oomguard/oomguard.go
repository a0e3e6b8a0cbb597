// Package oomguard is the sandbox's out-of-memory killer. gVisor accounts
// for the sandbox's memory (/proc/meminfo's MemTotal is the sandbox's
// memoryMB) but, unlike Linux, kills nothing when it runs out: the sentry
// grows until the host's cgroup limit kills the whole sandbox. The agent,
// the sandbox's first process, runs this guard so the sandbox fails like a
// small VM instead: when its processes have nearly used up MemTotal, the
// one with the most resident memory is killed (SIGKILL, as Linux's OOM
// killer does) and the sandbox lives on.
//
// Files do not count: the memory-backed root overlay and /tmp (meminfo's
// Shmem) are bounded by their own size, which the host limit allows for,
// and killing a process would not free them.
package oomguard

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Options tune Run. Zero values take the defaults.
type Options struct {
	// Proc is the procfs root. Default "/proc".
	Proc string
	// Reserve is how much of MemTotal must stay free of process memory;
	// below it the guard kills. Default 1/32 of MemTotal, at least 4 MiB.
	Reserve uint64
	// Logger receives one line per kill. Default slog.Default().
	Logger *slog.Logger
	// Kill kills pid. Default SIGKILL.
	Kill func(pid int) error
}

// Polling intervals: slow while memory is plentiful, fast when it is not
// (a hog touching pages at 1–2 GB/s gains 5–10 MiB per fast interval, well
// within the host limit's headroom).
const (
	slowEvery = 100 * time.Millisecond
	fastEvery = 5 * time.Millisecond
	// settle is how long after a kill the guard waits for the victim's
	// memory to be freed before it may kill again.
	settle = 100 * time.Millisecond
)

// Run guards until ctx ends.
func Run(ctx context.Context, o Options) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		t.Reset(Check(o))
	}
}

// Check looks once and kills if memory is short; it returns when to look
// again.
func Check(o Options) time.Duration {
	o = withDefaults(o)
	m, err := readMeminfo(filepath.Join(o.Proc, "meminfo"))
	if err != nil {
		return slowEvery
	}
	reserve := o.Reserve
	if reserve == 0 {
		reserve = max(m.total/32, 4<<20)
	}
	free := m.free + m.files // what processes may still take
	if free >= reserve {
		if free < m.total/4 {
			return fastEvery
		}
		return slowEvery
	}
	pid, comm, rss := largest(o.Proc)
	if pid <= 0 {
		return slowEvery
	}
	if err := o.Kill(pid); err != nil {
		return fastEvery
	}
	o.Logger.Warn("out of memory: killed process", "pid", pid, "comm", comm,
		"rssMiB", rss>>20, "freeMiB", free>>20, "totalMiB", m.total>>20)
	return settle
}

func withDefaults(o Options) Options {
	if o.Proc == "" {
		o.Proc = "/proc"
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Kill == nil {
		o.Kill = func(pid int) error { return syscall.Kill(pid, syscall.SIGKILL) }
	}
	return o
}

// meminfo is what the guard reads of /proc/meminfo, in bytes.
type meminfo struct {
	total, free, files uint64
}

// readMeminfo reads MemTotal, MemFree and Shmem (gVisor's tmpfs files).
func readMeminfo(path string) (meminfo, error) {
	var m meminfo
	f, err := os.Open(path)
	if err != nil {
		return m, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		n, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err != nil {
			continue
		}
		switch k {
		case "MemTotal":
			m.total = n << 10
		case "MemFree":
			m.free = n << 10
		case "Shmem":
			m.files = n << 10
		}
	}
	if m.total == 0 {
		return m, fmt.Errorf("%s: no MemTotal", path)
	}
	return m, sc.Err()
}

// largest returns the process with the most resident memory, never this
// process (the agent) nor pid 1.
func largest(proc string) (pid int, comm string, rss uint64) {
	ents, err := os.ReadDir(proc)
	if err != nil {
		return 0, "", 0
	}
	self := os.Getpid()
	page := uint64(os.Getpagesize())
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil || p == self || p == 1 {
			continue
		}
		b, err := os.ReadFile(filepath.Join(proc, e.Name(), "statm"))
		if err != nil {
			continue
		}
		f := strings.Fields(string(b))
		if len(f) < 2 {
			continue
		}
		res, err := strconv.ParseUint(f[1], 10, 64)
		if err != nil || res*page <= rss {
			continue
		}
		c, _ := os.ReadFile(filepath.Join(proc, e.Name(), "comm"))
		pid, comm, rss = p, strings.TrimSpace(string(c)), res*page
	}
	return pid, comm, rss
}
