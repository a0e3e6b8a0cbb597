package sandbox

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/runtime"
)

// exitWatch holds the Manager's waits on the supervisors of running
// sandboxes (runtime.Waiter): a sandbox whose supervisor exits on its own
// — the host's OOM killer as the last resort, a crash, a kill from
// outside — is known dead at once rather than at the next operation.
type exitWatch struct {
	mu    sync.Mutex
	seq   uint64
	waits map[string]exitWait // by sandbox id; guarded by mu
}

// exitWait is one wait in flight.
type exitWait struct {
	seq    uint64
	cancel context.CancelFunc
}

// watchExitLocked starts waiting on the incarnation of id that has just
// become running, replacing any earlier wait. It runs under m.mu (from
// release and adopt) and only starts a goroutine.
func (m *Manager) watchExitLocked(id string) {
	w, ok := m.rt.(runtime.Waiter)
	if !ok {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	m.exits.mu.Lock()
	if m.exits.waits == nil {
		m.exits.waits = map[string]exitWait{}
	}
	if old, ok := m.exits.waits[id]; ok {
		old.cancel()
	}
	m.exits.seq++
	seq := m.exits.seq
	m.exits.waits[id] = exitWait{seq: seq, cancel: cancel}
	m.exits.mu.Unlock()
	go m.waitExit(ctx, w, id, seq)
	m.watchMemoryLocked(ctx, id)
}

// unwatchExitLocked stops waiting on id (it is gone).
func (m *Manager) unwatchExitLocked(id string) {
	m.exits.mu.Lock()
	defer m.exits.mu.Unlock()
	if old, ok := m.exits.waits[id]; ok {
		old.cancel()
		delete(m.exits.waits, id)
	}
}

// currentExitWait reports whether seq is still id's wait.
func (m *Manager) currentExitWait(id string, seq uint64) bool {
	m.exits.mu.Lock()
	defer m.exits.mu.Unlock()
	w, ok := m.exits.waits[id]
	return ok && w.seq == seq
}

// waitExit waits on id's supervisor and handles its exit.
func (m *Manager) waitExit(ctx context.Context, w runtime.Waiter, id string, seq uint64) {
	ex, err := w.Wait(ctx, id)
	switch {
	case ctx.Err() != nil || errdefs.IsNotFound(err):
		return
	case errdefs.IsConflict(err):
		// It stopped between becoming running and the wait: an exit too.
		ex = m.stoppedExit(ctx, w, id)
	case err != nil:
		m.log.Warn("cannot wait on sandbox", "sandbox", id, "err", err)
		return
	}
	if ex.At.IsZero() {
		ex.At = m.now()
	}
	m.sandboxExited(ctx, id, seq, ex)
}

// stoppedExit is why id stopped before its wait began, as far as the
// backend can still tell.
func (m *Manager) stoppedExit(ctx context.Context, w runtime.Waiter, id string) runtime.Exit {
	const late = "stopped before the daemon could wait on it"
	ex, err := w.Stopped(ctx, id)
	if err != nil || ex.Reason == "" {
		return runtime.Exit{Reason: runtime.ExitKilled, At: m.now(), Detail: late}
	}
	if ex.At.IsZero() {
		ex.At = m.now()
	}
	ex.Detail += " (" + late + ")"
	return ex
}

// sandboxExited handles the exit of id's supervisor seen by wait seq. An
// exit during an operation (a pause's checkpoint stops the sandbox, a
// rollback replaces it) is the operation's: once the operation ends, a
// sandbox back in running has a new wait, and one elsewhere is not dead.
func (m *Manager) sandboxExited(ctx context.Context, id string, seq uint64, ex runtime.Exit) {
	for {
		m.mu.Lock()
		e, ok := m.boxes[id]
		if !ok || !m.currentExitWait(id, seq) {
			m.mu.Unlock()
			return
		}
		if e.state == StateRunning {
			m.mu.Unlock()
			break
		}
		done := e.done
		m.mu.Unlock()
		if done == nil {
			return // idle and not running: paused by an operation
		}
		select {
		case <-done:
		case <-ctx.Done():
			return
		}
	}
	if err := m.killDead(ctx, id, ex); err != nil && !errors.Is(err, errdefs.ErrConflict) {
		m.log.Error("release dead sandbox", "sandbox", id, "err", err)
	}
}

// killDead marks running sandbox id killed for ex's reason and releases
// what it held (network, cgroups, data-plane connections, its claim on a
// clone's snapshot).
func (m *Manager) killDead(ctx context.Context, id string, ex runtime.Exit) error {
	// The reason is on the record before the claim makes the sandbox show
	// as killed, so no reader sees "killed" without it; a claim lost to
	// another operation takes it back.
	m.mu.Lock()
	e, ok := m.boxes[id]
	if ok && e.state == StateRunning {
		e.rec.KillReason, e.rec.KilledAt = string(ex.Reason), ex.At
		e.rec.Error = fmt.Sprintf("killed: %s: %s", ex.Reason, ex.Detail)
	}
	m.mu.Unlock()
	o, err := m.claim(ctx, id, StateKilling, StateRunning)
	if err != nil {
		m.mu.Lock()
		if ok && e.state != StateKilling && e.state != StateKilled {
			e.rec.KillReason, e.rec.KilledAt, e.rec.Error = "", time.Time{}, ""
		}
		m.mu.Unlock()
		return err
	}
	m.log.Error("sandbox died", "sandbox", id, "reason", string(ex.Reason), "detail", ex.Detail)
	return m.destroy(ctx, o)
}

// Describe is Get that also answers for a sandbox that died on its own
// (state killed, with KillReason), so clients can learn why it went.
// Sandboxes killed on request stay ErrNotFound, as E2B's API has them.
func (m *Manager) Describe(ctx context.Context, id string) (*Sandbox, error) {
	sb, err := m.Get(ctx, id)
	if !errdefs.IsNotFound(err) {
		return sb, err
	}
	rec, serr := m.st.GetSandbox(ctx, id)
	if serr != nil || rec.State != string(StateKilled) || rec.KillReason == "" {
		return nil, err
	}
	return sandboxOf(rec, StateKilled), nil
}

// watchPooled waits on a pooled sandbox: one that dies before a create
// takes it leaves the pool and the host at once, so no create is handed a
// dead sandbox. Once taken, the sandbox's own wait (release) covers it.
// Its memory is watched too (a pooled code interpreter runs kernels).
func (m *Manager) watchPooled(ctx context.Context, tplID, id string, memoryMB int) {
	w, ok := m.rt.(runtime.Waiter)
	if !ok {
		return
	}
	m.watchPooledMemory(ctx, id, memoryMB)
	go func() {
		ex, err := w.Wait(ctx, id)
		if ctx.Err() != nil || errdefs.IsNotFound(err) || len(m.pool.removeWhere(tplID, func(x pooled) bool { return x.id == id })) == 0 {
			return
		}
		m.log.Warn("pooled sandbox died", "sandbox", id, "template", tplID, "reason", string(ex.Reason), "err", err)
		m.deletePooled(ctx, []string{id})
	}()
}
