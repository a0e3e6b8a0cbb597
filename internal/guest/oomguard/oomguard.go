// Package oomguard is the sandbox's out-of-memory handling. gVisor
// accounts for the sandbox's memory (/proc/meminfo's MemTotal is the
// sandbox's memoryMB) but, unlike Linux, fails no allocation and kills
// nothing when it runs out: the sentry grows until the host's cgroup limit
// kills the whole sandbox. The agent, the sandbox's first process, runs
// this guard so the sandbox fails like a small VM instead, in two steps:
//
//   - Memory short: the process with the most resident memory gets its
//     address-space limit (RLIMIT_AS, which gVisor enforces on every
//     mapping) lowered to what it has mapped, so its next allocation fails
//     with ENOMEM — Python raises MemoryError, malloc returns NULL — and it
//     may free memory and go on. Another one follows each time memory gets
//     shorter still. The limits are given back once memory is plentiful.
//   - Memory exhausted (a process faulting in memory it mapped before): the
//     largest process is killed (SIGKILL, as Linux's OOM killer does).
//
// The sandbox lives on either way. Files do not count: the memory-backed
// root overlay (meminfo's Shmem) is bounded by its own size, which the host
// limit allows for, and failing or killing a process would not free it;
// the guard counts only the processes' pages against MemTotal.
package oomguard

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Options tune a Guard. Zero values take the defaults.
type Options struct {
	// Proc is the procfs root. Default "/proc".
	Proc string
	// Reserve is how much of MemTotal must stay free of process memory;
	// below it the guard kills. Default 1/32 of MemTotal, at least 4 MiB.
	Reserve uint64
	// Logger receives one line per failed or killed process. Default
	// slog.Default().
	Logger *slog.Logger
	// Kill kills pid. Default SIGKILL.
	Kill func(pid int) error
	// LimitAS sets pid's soft RLIMIT_AS to limit and returns the one it
	// had. Default prlimit(2), which needs CAP_SYS_RESOURCE for processes
	// of other users.
	LimitAS func(pid int, limit uint64) (old uint64, err error)
	// Acting, when set, is told of each process the guard is about to make
	// fail or kill, before it does, so that whoever waits on the process
	// (the code interpreter, on its kernels) learns why it failed or died
	// before noticing.
	Acting func(Act)
	// Quiet, when set, reports that no process but the caller's own idle
	// ones exists, so memory cannot grow until the caller starts one; Run
	// then sleeps until Wake (or quietEvery) instead of polling.
	Quiet func() bool
	// Wake is signalled by the caller after it started a process (or gave
	// an idle one work), or when the host saw memory grow: Run looks at once.
	Wake <-chan struct{}
	// HostStep, when set, reports how far memory may grow before the host
	// signals Wake (0: the host does not). While the headroom outlasts a
	// step and the wake's delay, Run then looks only every wokenEvery
	// instead of at a hog's pace.
	HostStep func() uint64
}

// Act is what the guard is about to do to a process.
type Act struct {
	PID, PGID int
	Comm      string
	Kill      bool // kill; else its allocations fail
}

// Polling intervals: slow while memory is plentiful, fast when it is not
// (a hog touching pages at 1–4 GB/s gains 5–20 MiB per fast interval,
// within failMargin and the host limit's headroom). Every look wakes the
// sandbox — a few ms of host CPU on a virtualised host, 3% of a CPU per
// idle sandbox at 10 looks a second — so with much memory free the guard
// looks only as often as a hog growing at maxGrowth could use up the
// headroom above the failing threshold, and not at all while Quiet.
const (
	slowEvery  = 100 * time.Millisecond
	idleEvery  = time.Second
	quietEvery = 10 * time.Second
	fastEvery  = 5 * time.Millisecond
	// maxGrowth bounds how fast the processes' memory can grow: a Python
	// hog touched pages at ~210 MiB/s in a sandbox on one host and at
	// ~1.25 GB/s on another (a Jupyter kernel filling 900 MiB in 720 ms,
	// which 1 GiB/s let run past the failing threshold to the kill
	// between two looks); three times that leaves room for several
	// threads.
	maxGrowth = 4 << 30 // bytes per second
	// settle is how long after a kill the guard waits for the victim's
	// memory to be freed before it may kill again.
	settle = 100 * time.Millisecond
	// failMargin is how far above the kill reserve allocations start to
	// fail: more than a fast interval's growth, so a hog meets ENOMEM
	// before the reserve.
	failMargin = 32 << 20
	// failStep is how much shorter memory must get before one more process
	// has its allocations failed.
	failStep = 4 << 20
	// wakeDelay bounds how long the host's wake takes to reach the guard
	// (its cgroup event, the daemon's request into the sandbox): 2–25 ms
	// measured on a quiet host, more on a busy one; a hog's growth over it
	// must fit in the headroom too. At maxGrowth that is 300 MiB, which a
	// hog at the 1.25 GB/s measured takes 240 ms to fill; an idle base
	// sandbox (512 MiB, ~420 MiB of headroom) still waits for wakes.
	wakeDelay = 75 * time.Millisecond
	// wokenEvery is the pace while the host wakes the guard: only a net
	// for a wake that got lost (the daemon restarting).
	wokenEvery = 5 * time.Second
)

// Guard is the out-of-memory guard; its state is the processes whose
// allocations it made fail.
type Guard struct {
	o Options
	// capped maps each process whose RLIMIT_AS the guard lowered to the
	// soft limit to give back.
	capped map[int]uint64
	// cappedAt is the free memory when the guard last capped a process.
	cappedAt uint64
	// meminfo is /proc/meminfo's path, buf what it is read into.
	meminfo string
	buf     []byte
	// headroom is what processes could still take before their
	// allocations fail, as the last Check found it; 0 when memory was
	// short (Check then set its own fast pace).
	headroom uint64
	// calm is when the last kill's victim has had settle to free its
	// memory: a look before then (a wake: the host sees the victim's
	// memory go) kills nobody else.
	calm time.Time
	// last is when the previous look was and what it found free: a kill's
	// log says how far memory moved since, which tells a late look from a
	// stale meminfo (gVisor rescans the memory file at most every eight
	// times its last scan took).
	last     time.Time
	lastFree uint64
}

// New returns a guard with o's defaults filled in.
func New(o Options) *Guard {
	if o.Proc == "" {
		o.Proc = "/proc"
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Kill == nil {
		o.Kill = func(pid int) error { return syscall.Kill(pid, syscall.SIGKILL) }
	}
	if o.LimitAS == nil {
		o.LimitAS = prlimitAS
	}
	return &Guard{o: o, capped: map[int]uint64{}, meminfo: filepath.Join(o.Proc, "meminfo"), buf: make([]byte, 16<<10)}
}

// Run guards until ctx ends.
func Run(ctx context.Context, o Options) {
	g := New(o)
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-o.Wake:
		}
		t.Reset(g.next())
	}
}

// next looks once and returns when to look again: while memory is not
// short, after quietEvery when Options.Quiet says nothing can use more, and
// after wokenEvery when the host's wakes come soon enough.
func (g *Guard) next() time.Duration {
	d := g.Check()
	if g.headroom == 0 {
		return d
	}
	if g.o.Quiet != nil && g.o.Quiet() {
		return quietEvery
	}
	if g.o.HostStep != nil {
		step := g.o.HostStep()
		if step > 0 && g.headroom > wakeMargin(step) {
			return max(d, wokenEvery)
		}
	}
	return d
}

// Check looks once, fails allocations or kills if memory is short, and
// returns when to look again.
func (g *Guard) Check() time.Duration {
	g.headroom = 0
	m, err := readMeminfo(g.meminfo, g.buf)
	if err != nil {
		return slowEvery
	}
	reserve, failAt := g.reserve(m.total), g.failAt(m.total)
	free := m.free()
	defer func() { g.last, g.lastFree = time.Now(), free }()
	switch {
	case free < reserve:
		return g.kill(free, m.total)
	case free < failAt:
		g.fail(free)
		return fastEvery
	case free >= 2*failAt:
		g.release()
	}
	if free < m.total/4 {
		return fastEvery
	}
	g.headroom = free - failAt
	return headroomEvery(g.headroom)
}

// WantsWakes reports whether a guard with these options, in a sandbox
// whose processes take nothing, would wait for the host's wakes of step:
// a smaller sandbox's headroom never outlasts a step and the wake's delay,
// its guard paces itself always, and the wakes would only cost it work
// while a hog grows.
func WantsWakes(o Options, step uint64) bool {
	g := New(o)
	m, err := readMeminfo(g.meminfo, g.buf)
	if err != nil || step == 0 {
		return false
	}
	return m.total > g.failAt(m.total)+wakeMargin(step)
}

// wakeMargin is the headroom a guard woken every step needs to wait for
// the wakes: a step, plus a hog's growth over the wake's delay.
func wakeMargin(step uint64) uint64 {
	return step + uint64(maxGrowth*wakeDelay.Seconds())
}

// failAt is the free memory below which allocations fail.
func (g *Guard) failAt(total uint64) uint64 {
	return 2*g.reserve(total) + failMargin
}

// reserve is the free memory below which the guard kills.
func (g *Guard) reserve(total uint64) uint64 {
	if g.o.Reserve != 0 {
		return g.o.Reserve
	}
	return max(total/32, 4<<20)
}

// headroomEvery is how long a hog growing at maxGrowth takes to use up
// headroom bytes, between fastEvery and idleEvery. No slower floor: a
// small sandbox's headroom lasts a fast hog less than slowEvery (300 MiB:
// ~50 ms), and a look that came later found it past the kill reserve.
func headroomEvery(headroom uint64) time.Duration {
	d := time.Duration(float64(headroom) / maxGrowth * float64(time.Second))
	return min(max(d, fastEvery), idleEvery)
}

// kill kills the largest process.
func (g *Guard) kill(free, total uint64) time.Duration {
	if wait := time.Until(g.calm); wait > 0 {
		return wait
	}
	p, ok := largest(g.o.Proc, nil)
	if !ok {
		return slowEvery
	}
	g.acting(p, true)
	if err := g.o.Kill(p.pid); err != nil {
		return fastEvery
	}
	delete(g.capped, p.pid)
	g.calm = time.Now().Add(settle)
	g.o.Logger.Warn("out of memory: killed process", "pid", p.pid, "comm", p.comm,
		"rssMiB", p.rss>>20, "freeMiB", free>>20, "totalMiB", total>>20,
		"lastLookAgo", time.Since(g.last).Round(time.Millisecond), "lastFreeMiB", g.lastFree>>20)
	return settle
}

// fail makes the allocations of the largest process not yet failed fail,
// unless one was failed since memory last got failStep shorter.
func (g *Guard) fail(free uint64) {
	if len(g.capped) > 0 && free+failStep > g.cappedAt {
		return
	}
	p, ok := largest(g.o.Proc, g.capped)
	if !ok {
		return
	}
	g.acting(p, false)
	old, err := g.o.LimitAS(p.pid, p.size)
	if err != nil {
		return
	}
	g.capped[p.pid] = old
	g.cappedAt = free
	g.o.Logger.Warn("out of memory: allocations of process fail", "pid", p.pid, "comm", p.comm,
		"rssMiB", p.rss>>20, "mappedMiB", p.size>>20, "freeMiB", free>>20)
}

// acting tells Options.Acting, if any, what is about to happen to p.
func (g *Guard) acting(p proc, kill bool) {
	if g.o.Acting != nil {
		g.o.Acting(Act{PID: p.pid, PGID: pgid(g.o.Proc, p.pid), Comm: p.comm, Kill: kill})
	}
}

// pgid reads pid's process group from its stat (the third field after the
// parenthesised command name); 0 if unknown.
func pgid(procDir string, pid int) int {
	b, err := os.ReadFile(filepath.Join(procDir, strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 3 {
		return 0
	}
	n, _ := strconv.Atoi(f[2])
	return n
}

// release gives the processes the guard failed their limits back.
func (g *Guard) release() {
	for pid, old := range g.capped {
		g.o.LimitAS(pid, old) // a process gone meanwhile: nothing to give back
		delete(g.capped, pid)
	}
}

// prlimitAS sets pid's soft address-space limit, keeping the hard one.
func prlimitAS(pid int, limit uint64) (uint64, error) {
	var cur unix.Rlimit
	if err := unix.Prlimit(pid, unix.RLIMIT_AS, nil, &cur); err != nil {
		return 0, err
	}
	next := unix.Rlimit{Cur: min(limit, cur.Max), Max: cur.Max}
	if err := unix.Prlimit(pid, unix.RLIMIT_AS, &next, nil); err != nil {
		return 0, err
	}
	return cur.Cur, nil
}

// meminfo is what the guard reads of gVisor's /proc/meminfo, in bytes:
// MemTotal, and the processes' memory — their anonymous pages (AnonPages
// counts tmpfs files too) and their file pages (Cached, tmpfs files too).
// MemFree would not do: it also lacks the pages of files just deleted and
// the sentry's own, which gVisor counts as System until it recycles them
// (free for a process's next allocation): after `rm` of a 1 GiB file
// MemFree stayed near 0 long enough for the guard to kill a bystander.
type meminfo struct {
	total, processes uint64
}

// free is the memory processes may still take.
func (m meminfo) free() uint64 {
	return m.total - min(m.processes, m.total)
}

// readMeminfo reads path's MemTotal, AnonPages, Cached and Shmem into
// buf, allocating nothing but the path's C string: the guard reads it up
// to ten times a second for the sandbox's life, and garbage from that
// keeps an idle agent's heap (and so the sandbox) larger.
func readMeminfo(path string, buf []byte) (meminfo, error) {
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return meminfo{}, err
	}
	n, err := syscall.Read(fd, buf)
	syscall.Close(fd)
	if err != nil {
		return meminfo{}, err
	}
	var total, anon, cached, shm uint64
	for rest := buf[:max(n, 0)]; len(rest) > 0; {
		line := rest
		if i := bytes.IndexByte(rest, '\n'); i >= 0 {
			line, rest = rest[:i], rest[i+1:]
		} else {
			rest = nil
		}
		switch {
		case bytes.HasPrefix(line, []byte("MemTotal:")):
			total = kB(line)
		case bytes.HasPrefix(line, []byte("AnonPages:")):
			anon = kB(line)
		case bytes.HasPrefix(line, []byte("Cached:")):
			cached = kB(line)
		case bytes.HasPrefix(line, []byte("Shmem:")):
			shm = kB(line)
		}
	}
	if total == 0 {
		return meminfo{}, fmt.Errorf("%s: no MemTotal", path)
	}
	anon -= min(shm, anon)
	cached -= min(shm, cached)
	return meminfo{total: total, processes: anon + cached}, nil
}

// kB returns the number of a meminfo line ("Key:   123 kB") in bytes.
func kB(line []byte) uint64 {
	var n uint64
	for _, c := range line[bytes.IndexByte(line, ':')+1:] {
		if c >= '0' && c <= '9' {
			n = n*10 + uint64(c-'0')
		} else if n > 0 {
			break
		}
	}
	return n << 10
}

// proc is what the guard reads of a process.
type proc struct {
	pid       int
	comm      string
	rss, size uint64 // resident and mapped bytes
}

// largest returns the process with the most resident memory, never this
// process (the agent), pid 1 nor one in skip.
func largest(procDir string, skip map[int]uint64) (proc, bool) {
	ents, err := os.ReadDir(procDir)
	if err != nil {
		return proc{}, false
	}
	self := os.Getpid()
	page := uint64(os.Getpagesize())
	var best proc
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if _, skipped := skip[p]; err != nil || p == self || p == 1 || skipped {
			continue
		}
		b, err := os.ReadFile(filepath.Join(procDir, e.Name(), "statm"))
		if err != nil {
			continue
		}
		f := strings.Fields(string(b))
		if len(f) < 2 {
			continue
		}
		size, err1 := strconv.ParseUint(f[0], 10, 64)
		res, err2 := strconv.ParseUint(f[1], 10, 64)
		if err1 != nil || err2 != nil || res*page <= best.rss {
			continue
		}
		c, _ := os.ReadFile(filepath.Join(procDir, e.Name(), "comm"))
		best = proc{pid: p, comm: strings.TrimSpace(string(c)), rss: res * page, size: size * page}
	}
	return best, best.pid > 0
}
