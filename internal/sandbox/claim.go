package sandbox

import (
	"context"
	"fmt"
	"slices"

	"github.com/forkbox/forkbox/internal/errdefs"
)

// persistLocked writes e's record. It runs under m.mu so records reach the
// store in the order their changes were made (a stale copy can never
// overwrite a newer state). SQLite writes are sub-millisecond here.
func (m *Manager) persistLocked(ctx context.Context, e *entry) error {
	e.rec.State = string(e.state)
	rec := e.rec
	if err := m.st.PutSandbox(context.WithoutCancel(ctx), &rec); err != nil {
		m.log.Error("persist sandbox", "sandbox", rec.ID, "state", rec.State, "err", err)
		return fmt.Errorf("persist sandbox %s: %w", rec.ID, err)
	}
	return nil
}

// lookupLocked returns the live entry for id or ErrNotFound.
func (m *Manager) lookupLocked(id string) (*entry, error) {
	e, ok := m.boxes[id]
	if !ok {
		return nil, fmt.Errorf("sandbox %q: %w", id, errdefs.ErrNotFound)
	}
	return e, nil
}

// claim atomically moves sandbox id from one of the states in from to the
// transient state to, and persists it. It is the only way an operation may
// start: whoever wins the claim owns the sandbox until release. A sandbox in
// a state not in from gets ErrConflict (or ErrNotFound when gone). The
// previous state is returned so the operation can restore it on failure.
func (m *Manager) claim(ctx context.Context, id string, to State, from ...State) (*entry, State, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, err := m.lookupLocked(id)
	if err != nil {
		return nil, "", err
	}
	prev := e.state
	if !slices.Contains(from, prev) {
		return nil, prev, fmt.Errorf("sandbox %s is %s: %w", id, prev.Public(), errdefs.ErrConflict)
	}
	mustTransition(prev, to)
	e.state, e.from = to, prev
	e.done = make(chan struct{})
	m.persistLocked(ctx, e)
	if prev == StateRunning && to != StateSnapshotting {
		// Leaving running (kill, pause, rollback): the sandbox's side of its
		// connections is about to vanish; cut them so clients hear about it.
		go m.dataConns.closeAll(id)
	}
	return e, prev, nil
}

// release ends the claim held on e, moving it to state to; update (may be
// nil) changes record fields under the lock before the record is persisted.
func (m *Manager) release(ctx context.Context, e *entry, to State, update func(*entry)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	mustTransition(e.state, to)
	e.state = to
	if update != nil {
		update(e)
	}
	m.persistLocked(ctx, e)
	if to == StateKilled {
		delete(m.boxes, e.rec.ID)
	}
	if e.done != nil {
		close(e.done)
		e.done = nil
	}
}

// update changes fields of a live sandbox (TTL changes) and persists them.
// fn runs under the lock and may refuse with an error.
func (m *Manager) update(ctx context.Context, id string, fn func(*entry) error) (*Sandbox, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, err := m.lookupLocked(id)
	if err != nil {
		return nil, err
	}
	if err := fn(e); err != nil {
		return nil, err
	}
	if err := m.persistLocked(ctx, e); err != nil {
		return nil, err
	}
	return e.view(), nil
}

// busy are the states an operation holds; claimWaiting waits them out.
var busy = []State{StateCreating, StatePausing, StateResuming, StateSnapshotting}

// claimWaiting is claim for operations that should queue behind one in
// progress (a snapshot asked for right after an asynchronous pause) rather
// than fail with ErrConflict.
func (m *Manager) claimWaiting(ctx context.Context, id string, to State, from ...State) (*entry, State, error) {
	for {
		e, prev, err := m.claim(ctx, id, to, from...)
		if err == nil || !errdefs.IsConflict(err) || !slices.Contains(busy, prev) {
			return e, prev, err
		}
		if err := m.waitIdle(ctx, id); err != nil {
			return nil, "", err
		}
	}
}

// WaitIdle blocks until no operation holds sandbox id.
func (m *Manager) WaitIdle(ctx context.Context, id string) error { return m.waitIdle(ctx, id) }
