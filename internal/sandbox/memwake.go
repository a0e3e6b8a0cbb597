package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"time"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/runtime"
)

// The memory watch. Each agent runs an out-of-memory guard that must look
// at the sandbox's memory often enough to catch a hog before the host's
// limit kills the whole sandbox, and every look wakes the sandbox (~1.7 ms
// of host CPU here): ten a second for a sandbox that keeps a process of its
// own. The host sees the same growth for free in the sandbox's memory
// cgroup, so the Manager watches it (runtime.MemoryWatcher) and wakes the
// guard (agent POST /forkbox/memory-wake) each time the memory moved by a
// step; the guard then only looks on its own when its headroom is too
// small to wait for a wake.

// memoryWakeTimeout bounds one wake's request.
const memoryWakeTimeout = 2 * time.Second

// memoryStep is how far a sandbox of memoryMB may grow between two wakes
// of its guard: 1/32 of its memory, at least 16 MiB.
func memoryStep(memoryMB int) uint64 {
	return max(uint64(memoryMB)<<20/32, 16<<20)
}

// watchMemoryLocked starts the memory watch of the incarnation of id that
// has just become running, under ctx (ended when it stops being watched).
// It runs under m.mu.
func (m *Manager) watchMemoryLocked(ctx context.Context, id string) {
	mw, ok := m.rt.(runtime.MemoryWatcher)
	e, found := m.boxes[id]
	if !ok || !found || m.cfg.NoMemoryWake {
		return
	}
	go m.watchMemory(ctx, mw, id, memoryStep(e.rec.MemoryMB))
}

// pooledWatches are the memory watches of pooled sandboxes, by id: a
// create that takes one stops its watch (stopPooledMemory) before /init.
type pooledWatches struct {
	mu    sync.Mutex
	stops map[string]func() // guarded by mu
}

// watchPooledMemory watches pooled sandbox id's memory (a pooled code
// interpreter runs its kernels) until a create takes it or ctx ends.
func (m *Manager) watchPooledMemory(ctx context.Context, id string, memoryMB int) {
	mw, ok := m.rt.(runtime.MemoryWatcher)
	if !ok || m.cfg.NoMemoryWake {
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	m.pooledMem.mu.Lock()
	if m.pooledMem.stops == nil {
		m.pooledMem.stops = map[string]func(){}
	}
	m.pooledMem.stops[id] = func() { cancel(); <-done }
	m.pooledMem.mu.Unlock()
	go func() {
		defer close(done)
		m.watchMemory(ctx, mw, id, memoryStep(memoryMB))
		m.pooledMem.mu.Lock()
		delete(m.pooledMem.stops, id) // gone from the host: nothing to stop
		m.pooledMem.mu.Unlock()
	}()
}

// stopPooledMemory ends pooled sandbox id's watch and waits until no wake
// of it is in flight: a create's /init makes the guard pace itself until
// the sandbox's own watch is armed, and a late pooled wake must not undo
// that.
func (m *Manager) stopPooledMemory(id string) {
	m.pooledMem.mu.Lock()
	stop := m.pooledMem.stops[id]
	delete(m.pooledMem.stops, id)
	m.pooledMem.mu.Unlock()
	if stop != nil {
		stop()
	}
}

// watchMemory wakes id's guard, with the step, once the watch is armed
// and then on each step until ctx ends, the sandbox stops or the agent
// answers 404 (older than the route) or 410 (a sandbox too small for its
// guard to wait for wakes): its guard paces itself. A watch that fails
// tells the agent the wakes stopped, so its guard paces itself again. The
// guard keeps its own pace until the first wake: a hog started at once
// must not outrun a watch still arming.
func (m *Manager) watchMemory(ctx context.Context, mw runtime.MemoryWatcher, id string, step uint64) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	err := mw.WatchMemory(ctx, id, step, func() {
		switch m.wakeGuard(ctx, id, step) {
		case http.StatusNotFound, http.StatusGone:
			cancel() // an agent older than the route, or a sandbox too small: it paces itself
		}
	})
	if err == nil || ctx.Err() != nil || errdefs.IsConflict(err) || errdefs.IsNotFound(err) {
		return
	}
	m.log.Warn("cannot watch sandbox memory: its guard paces itself", "sandbox", id, "err", err)
	m.wakeGuard(context.WithoutCancel(ctx), id, 0)
}

// wakeGuard posts step to id's agent, which wakes its guard; it returns
// the agent's status, 0 when the request failed.
func (m *Manager) wakeGuard(ctx context.Context, id string, step uint64) int {
	ctx, cancel := context.WithTimeout(ctx, memoryWakeTimeout)
	defer cancel()
	m.mu.Lock()
	token, busy := "", false
	if e, ok := m.boxes[id]; ok {
		token, busy = e.rec.EnvdAccessToken, e.state != StateRunning || e.done != nil
	}
	m.mu.Unlock()
	if busy {
		// An operation holds the sandbox: a checkpoint's own writes grow
		// the cgroup (the page cache of its image), and a packet arriving
		// while runsc saves the network stack can deadlock the save
		// (gVisor's beforeSave waits for its packet dispatcher under the
		// stack's lock, which that dispatcher needs to deliver the packet).
		return http.StatusNoContent
	}
	body, _ := json.Marshal(map[string]uint64{"step": step})
	resp, err := m.agentRequest(ctx, http.MethodPost, id, "/forkbox/memory-wake", token, bytes.NewReader(body))
	if err != nil {
		m.log.Debug("memory wake not delivered", "sandbox", id, "err", err)
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}
