package oomguard

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// fakeProc writes a procfs with gVisor's meminfo — of a sandbox where
// processes may still take freeKB of totalKB and shmemKB are files —, with
// systemKB more in use by the sentry or deleted files (MemFree lacks
// them), and the given pids' statm (resident pages) and comm.
func fakeProc(t *testing.T, totalKB, freeKB, shmemKB int, rss map[int]int) string {
	return fakeProcSystem(t, totalKB, freeKB, shmemKB, 0, rss)
}

func fakeProcSystem(t *testing.T, totalKB, freeKB, shmemKB, systemKB int, rss map[int]int) string {
	t.Helper()
	dir := t.TempDir()
	anon := totalKB - freeKB - shmemKB
	memFree := max(0, freeKB-systemKB)
	mi := fmt.Sprintf("MemTotal:       %d kB\nMemFree:        %d kB\nMemAvailable:   %d kB\nCached:         %d kB\nAnonPages:      %d kB\nShmem:          %d kB\n",
		totalKB, memFree, memFree, shmemKB, anon+shmemKB, shmemKB)
	if err := os.WriteFile(filepath.Join(dir, "meminfo"), []byte(mi), 0o644); err != nil {
		t.Fatal(err)
	}
	for pid, pages := range rss {
		d := filepath.Join(dir, strconv.Itoa(pid))
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(d, "statm"), fmt.Appendf(nil, "%d %d 0 0 0 0 0\n", pages*2, pages), 0o644)
		os.WriteFile(filepath.Join(d, "comm"), []byte("p"+strconv.Itoa(pid)+"\n"), 0o644)
		os.WriteFile(filepath.Join(d, "stat"), fmt.Appendf(nil, "%d (p (x)) S 1 %d %d 0 -1\n", pid, pid+1000, pid+1000), 0o644)
	}
	return dir
}

// Pages of deleted files the sentry has not recycled yet are free for the
// processes, though MemFree lacks them: nobody is failed or killed.
func TestDeletedFilesAreFree(t *testing.T) {
	proc := fakeProcSystem(t, 512<<10, 400<<10, 0, 400<<10, map[int]int{41: 1000})
	g := New(Options{Proc: proc, Kill: func(int) error { t.Fatal("killed"); return nil },
		LimitAS: func(int, uint64) (uint64, error) { t.Fatal("failed"); return 0, nil }})
	if got, want := g.Check(), headroomEvery((400-64)<<20); got != want {
		t.Errorf("Check = %v, want %v", got, want)
	}
}

// limits records the guard's RLIMIT_AS changes.
type limits map[int]uint64

func (l limits) set(pid int, limit uint64) (uint64, error) {
	old, ok := l[pid]
	if !ok {
		old = ^uint64(0)
	}
	l[pid] = limit
	return old, nil
}

func TestCheck(t *testing.T) {
	// pid 1 (the agent's place) and this process are never victims,
	// however large.
	rss := map[int]int{1: 1 << 28, os.Getpid(): 1 << 28, 40: 100, 41: 100000, 42: 5000}
	tests := []struct {
		name     string
		freeKB   int
		shmemKB  int
		wantKill int
		wantCap  int
		wantNext time.Duration
	}{
		// The failing threshold is 64 MiB: 336 MiB above it lasts 82 ms
		// at maxGrowth.
		{"plenty", 400 << 10, 0, 0, 0, 82031250 * time.Nanosecond},
		{"getting short: look more often", 100 << 10, 0, 0, 0, fastEvery},
		// 512 MiB: the reserve is 16 MiB, allocations fail below 64 MiB.
		{"short: the largest's allocations fail", 60 << 10, 0, 0, 41, fastEvery},
		{"exhausted: the largest goes", 1 << 10, 0, 41, 0, settle},
		// Files are 300 MiB: processes may take 301 MiB more.
		{"files fill memory: no process to blame", 1 << 10, 300 << 10, 0, 0, headroomEvery((301 - 64) << 20)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			proc := fakeProc(t, 512<<10, tt.freeKB, tt.shmemKB, rss)
			killed := 0
			lim := limits{}
			got := New(Options{Proc: proc, Kill: func(pid int) error { killed = pid; return nil }, LimitAS: lim.set}).Check()
			if got != tt.wantNext || killed != tt.wantKill {
				t.Errorf("Check = next in %v, killed %d; want %v, %d", got, killed, tt.wantNext, tt.wantKill)
			}
			if tt.wantCap == 0 && len(lim) > 0 {
				t.Errorf("limits lowered: %v", lim)
			}
			if tt.wantCap != 0 && (len(lim) != 1 || lim[tt.wantCap] != 2*100000*uint64(os.Getpagesize())) {
				t.Errorf("limits %v, want pid %d's at its mapped size", lim, tt.wantCap)
			}
		})
	}
}

// While memory gets shorter, one more process's allocations fail each
// failStep; once memory is plentiful again they get their limits back.
func TestFailThenRelease(t *testing.T) {
	rss := map[int]int{40: 100, 41: 100000, 42: 5000}
	lim := limits{41: 7 << 30}
	var logs []string
	g := New(Options{Kill: func(int) error { t.Fatal("killed"); return nil }, LimitAS: lim.set,
		Logger: slog.New(slog.NewTextHandler(writerFunc(func(b []byte) { logs = append(logs, string(b)) }), nil))})
	step := func(freeKB int) {
		t.Helper()
		g.o.Proc = fakeProc(t, 512<<10, freeKB, 0, rss)
		g.meminfo = filepath.Join(g.o.Proc, "meminfo")
		g.Check()
	}
	step(60 << 10)
	step(59 << 10) // not failStep shorter: nobody else
	if _, ok := lim[42]; ok || len(g.capped) != 1 {
		t.Fatalf("after 1 MiB less: capped %v", g.capped)
	}
	step(55 << 10)
	if _, ok := lim[42]; !ok {
		t.Fatalf("4 MiB shorter still, the next largest keeps its limit: %v", lim)
	}
	step(100 << 10) // better, not plenty: limits stay
	if len(g.capped) != 2 {
		t.Fatalf("limits given back too early: %v", g.capped)
	}
	step(200 << 10)
	if len(g.capped) != 0 || lim[41] != 7<<30 || lim[42] != ^uint64(0) {
		t.Errorf("after memory came back: capped %v, limits %v", g.capped, lim)
	}
	if len(logs) != 2 || !strings.Contains(logs[0], "allocations of process fail") || !strings.Contains(logs[0], "pid=41") {
		t.Errorf("logs %q", logs)
	}
}

type writerFunc func([]byte)

func (f writerFunc) Write(b []byte) (int, error) { f(b); return len(b), nil }

// Reading meminfo allocates next to nothing (the path's C string): the
// guard reads it ten times a second for the sandbox's life.
func TestReadMeminfoAllocatesNothing(t *testing.T) {
	g := New(Options{Proc: fakeProc(t, 512<<10, 100<<10, 10<<10, nil)})
	var m meminfo
	allocs := testing.AllocsPerRun(100, func() { m, _ = readMeminfo(g.meminfo, g.buf) })
	// 100 MiB free and 10 MiB of files: processes may take 110.
	if allocs > 1 || m.total != 512<<20 || m.free() != 110<<20 {
		t.Errorf("readMeminfo: %v allocations, %+v (free %d MiB)", allocs, m, m.free()>>20)
	}
}

// Acting hears of a fail and of a kill before either happens, with the
// process's group.
func TestActing(t *testing.T) {
	rss := map[int]int{41: 100000, 42: 5000}
	var acts []Act
	order := ""
	g := New(Options{
		Kill:    func(int) error { order += "kill "; return nil },
		LimitAS: func(int, uint64) (uint64, error) { order += "limit "; return 0, nil },
		Acting:  func(a Act) { order += "acting "; acts = append(acts, a) },
	})
	for _, freeKB := range []int{60 << 10, 1 << 10} {
		g.o.Proc = fakeProc(t, 512<<10, freeKB, 0, rss)
		g.meminfo = filepath.Join(g.o.Proc, "meminfo")
		g.Check()
	}
	want := []Act{{PID: 41, PGID: 1041, Comm: "p41"}, {PID: 41, PGID: 1041, Comm: "p41", Kill: true}}
	if fmt.Sprint(acts) != fmt.Sprint(want) || order != "acting limit acting kill " {
		t.Errorf("acts %+v, order %q; want %+v told before each", acts, order, want)
	}
}

// The guard looks as often as a hog at maxGrowth could use the headroom
// up, never less often than idleEvery nor more than slowEvery.
func TestHeadroomEvery(t *testing.T) {
	for _, tt := range []struct {
		headroom uint64
		want     time.Duration
	}{
		{0, fastEvery},
		{10 << 20, fastEvery},
		{256 << 20, 62500 * time.Microsecond},
		{512 << 20, 125 * time.Millisecond},
		{2 << 30, 500 * time.Millisecond},
		{8 << 30, idleEvery},
	} {
		if got := headroomEvery(tt.headroom); got != tt.want {
			t.Errorf("headroomEvery(%d MiB) = %v, want %v", tt.headroom>>20, got, tt.want)
		}
	}
}

// While Quiet, the guard looks only every quietEvery, and at once when
// woken; not quiet, it looks at its headroom's pace.
func TestRunQuietAndWake(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		proc := fakeProc(t, 8<<20, 7900<<10, 0, map[int]int{40: 100})
		var quiet atomic.Bool
		quiet.Store(true)
		looks := make(chan struct{}, 100)
		wake := make(chan struct{}, 1)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go Run(ctx, Options{Proc: proc, Wake: wake, Quiet: func() bool { looks <- struct{}{}; return quiet.Load() }})
		count := func(d time.Duration) int {
			time.Sleep(d)
			synctest.Wait()
			n := len(looks)
			for range n {
				<-looks
			}
			return n
		}
		if n := count(time.Millisecond); n != 1 {
			t.Fatalf("first look: %d", n)
		}
		if n := count(quietEvery - 2*time.Millisecond); n != 0 {
			t.Errorf("quiet: %d looks before quietEvery", n)
		}
		wake <- struct{}{}
		if n := count(time.Millisecond); n != 1 {
			t.Errorf("woken: %d looks, want 1 at once", n)
		}
		quiet.Store(false)
		wake <- struct{}{}
		count(time.Millisecond)
		// 8 GiB with 7.9 GiB free: the headroom allows idleEvery.
		if n := count(10 * idleEvery); n != 10 {
			t.Errorf("not quiet: %d looks in 10 idleEvery, want 10", n)
		}
	})
}

// When the guard looks next, by what it knows: a quiet sandbox waits
// quietEvery whatever its size (a small one's headroom lasts a hog less
// than slowEvery, which once kept it polling); with the host's wakes, the
// guard waits wokenEvery while its headroom outlasts a step and the wake's
// delay, and keeps its own pace otherwise; short memory is fast always.
func TestNext(t *testing.T) {
	for _, tt := range []struct {
		name            string
		totalKB, freeKB int
		quiet           bool
		step            uint64
		want            time.Duration
	}{
		{"quiet, 8 GiB", 8 << 20, 7900 << 10, true, 0, quietEvery},
		{"quiet, 256 MiB", 256 << 10, 200 << 10, true, 0, quietEvery},
		{"busy, no wakes: a hog's pace", 512 << 10, 480 << 10, false, 0, headroomEvery((480 - 64) << 20)},
		{"busy, woken by the host", 512 << 10, 500 << 10, false, 16 << 20, wokenEvery},
		{"busy, woken, headroom just short of a step and the wake's delay", 512 << 10, 380 << 10, false, 16 << 20, headroomEvery((380 - 64) << 20)},
		{"busy, woken, a large step", 512 << 10, 480 << 10, false, 256 << 20, headroomEvery((480 - 64) << 20)},
		{"busy, woken, headroom shorter than a step and the wake's delay", 512 << 10, 250 << 10, false, 16 << 20, headroomEvery((250 - 64) << 20)},
		{"quiet, memory short", 512 << 10, 100 << 10, true, 16 << 20, fastEvery},
		{"busy, woken, memory short", 512 << 10, 100 << 10, false, 16 << 20, fastEvery},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := New(Options{Proc: fakeProc(t, tt.totalKB, tt.freeKB, 0, map[int]int{40: 100}),
				Quiet: func() bool { return tt.quiet }, HostStep: func() uint64 { return tt.step },
				Kill: func(int) error { return nil }, LimitAS: func(int, uint64) (uint64, error) { return 0, nil }})
			if got := g.next(); got != tt.want {
				t.Errorf("next() = %v, want %v", got, tt.want)
			}
		})
	}
}

// A sandbox waits for the host's wakes only if, empty, its headroom above
// the failing threshold outlasts a step and the wake's delay: base's
// 512 MiB does, the limits test's 300 MiB does not.
func TestWantsWakes(t *testing.T) {
	for _, tt := range []struct {
		totalKB int
		step    uint64
		want    bool
	}{
		{512 << 10, 16 << 20, true},
		{1 << 20, 32 << 20, true},
		{300 << 10, 16 << 20, false},
		{512 << 10, 0, false},
		{512 << 10, 256 << 20, false},
	} {
		o := Options{Proc: fakeProc(t, tt.totalKB, tt.totalKB, 0, nil)}
		if got := WantsWakes(o, tt.step); got != tt.want {
			t.Errorf("WantsWakes(%d MiB, step %d MiB) = %v, want %v", tt.totalKB>>10, tt.step>>20, got, tt.want)
		}
	}
}

// After a kill, the victim has settle to free its memory: a look before
// then (the host's wake as the victim's memory goes) kills nobody else,
// one after it does if memory is still exhausted.
func TestSettleAfterKill(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		proc := fakeProc(t, 512<<10, 1<<10, 0, map[int]int{41: 100000, 42: 5000})
		var killed []int
		g := New(Options{Proc: proc, Kill: func(pid int) error { killed = append(killed, pid); return nil },
			LimitAS: func(int, uint64) (uint64, error) { return 0, nil }})
		if got := g.Check(); got != settle || len(killed) != 1 {
			t.Fatalf("exhausted: next in %v, killed %v; want %v, one", got, killed, settle)
		}
		time.Sleep(settle / 10)
		if got := g.Check(); got != settle-settle/10 || len(killed) != 1 {
			t.Errorf("woken %v after the kill: next in %v, killed %v; want %v, still one", settle/10, got, killed, settle-settle/10)
		}
		time.Sleep(settle)
		if g.Check(); len(killed) != 2 {
			t.Errorf("after settle, still exhausted: killed %v, want a second", killed)
		}
	})
}
