package agent

import (
	"errors"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

// reaper collects the exit status of every child of the agent. As the
// sandbox's PID 1 the agent inherits orphaned grandchildren (a shell's
// background jobs), and they stay zombies unless someone waits for them, so
// the agent waits for any child (wait4(-1)) in one place and hands statuses
// to the processes it started. For that reason nothing else in the agent may
// call exec.Cmd.Wait: it would race the reaper for its child's status.
type reaper struct {
	log *slog.Logger
	// mu is held while starting a child and registering its pid, and while
	// reaping, so a child that dies instantly is never reaped before its
	// waiter exists.
	mu      sync.Mutex
	waiters map[int]chan syscall.WaitStatus // guarded by mu
	sigs    chan os.Signal
}

// theReaper is the process-wide reaper. wait4(-1) collects any child of the
// process, so two reapers would steal each other's statuses: every Agent in
// a process (tests create many) shares this one.
var theReaper = sync.OnceValue(func() *reaper {
	r := &reaper{log: slog.Default(), waiters: map[int]chan syscall.WaitStatus{}, sigs: make(chan os.Signal, 1)}
	signal.Notify(r.sigs, syscall.SIGCHLD)
	go r.loop()
	return r
})

// sharedReaper returns the process-wide reaper, starting it on first use.
// It reaps on SIGCHLD: signals coalesce, but a SIGCHLD that finds the
// channel full finds a reap still to come, and a reap takes every exited
// child. It also reaps every reapEvery in case that reasoning has a hole;
// not more often, since every wake-up costs an idle sandbox host CPU (a
// one-second tick was half of an idle sandbox's, docs/benchmarks.md).
func sharedReaper() *reaper { return theReaper() }

// reapEvery is how often the reaper reaps without a SIGCHLD.
const reapEvery = 30 * time.Second

func (r *reaper) loop() {
	tick := time.NewTicker(reapEvery)
	defer tick.Stop()
	for {
		select {
		case <-r.sigs:
		case <-tick.C:
		}
		r.reapAll()
	}
}

// reapAll waits for every child that has exited, without blocking.
func (r *reaper) reapAll() {
	for {
		r.mu.Lock()
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if errors.Is(err, syscall.EINTR) {
			r.mu.Unlock()
			continue
		}
		if err != nil || pid <= 0 {
			r.mu.Unlock()
			return
		}
		ch, ok := r.waiters[pid]
		delete(r.waiters, pid)
		r.mu.Unlock()
		if ok {
			ch <- ws // buffered: never blocks the reaper
		} else {
			r.log.Debug("reaped orphan", "pid", pid, "status", ws)
		}
	}
}

// start runs startFn (which must start exactly one child and return its
// pid) and registers a waiter for it atomically with respect to reaping.
func (r *reaper) start(startFn func() (int, error)) (int, <-chan syscall.WaitStatus, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	pid, err := startFn()
	if err != nil {
		return 0, nil, err
	}
	ch := make(chan syscall.WaitStatus, 1)
	r.waiters[pid] = ch
	return pid, ch, nil
}
