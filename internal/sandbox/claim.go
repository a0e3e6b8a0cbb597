package sandbox

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/forkbox/forkbox/internal/cleanup"
	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/store"
)

// op is an operation holding a sandbox's claim: it won the move into a
// transient state (claim) or registered a new sandbox (register), and owns
// the sandbox until it ends with done or fail — exactly once, on every path.
// Its steps that change the host push their inverses on undo; fail runs
// them, done drops them.
type op struct {
	m *Manager
	e *entry
	// from is the state the claim started from (creating for a new sandbox).
	from State
	undo cleanup.Stack
	// ended is set by done or fail; a second end is a bug.
	ended bool
}

// id is the claimed sandbox's id.
func (o *op) id() string { return o.e.rec.ID }

// done ends the operation: the undo steps are dropped and the sandbox moves
// to state to; update (may be nil) changes record fields under the lock
// before the record is persisted. A failed store write is returned.
func (o *op) done(ctx context.Context, to State, update func(*entry)) error {
	o.undo.Disarm()
	return o.end(ctx, to, update)
}

// fail ends the operation after a failure: its undo steps run newest first,
// then the sandbox moves to to as done does. cause is returned, joined with
// a failed store write.
func (o *op) fail(ctx context.Context, cause error, to State, update func(*entry)) error {
	o.undo.Run(ctx)
	return errors.Join(cause, o.end(ctx, to, update))
}

// end releases the claim, moving the sandbox to state to. A sandbox that
// ends killed lets go of its content, which goes if nothing else holds it.
func (o *op) end(ctx context.Context, to State, update func(*entry)) error {
	err := o.endLocked(ctx, to, update)
	if to == StateKilled {
		o.m.release(ctx, sandboxHolder(o.id()))
	}
	return err
}

func (o *op) endLocked(ctx context.Context, to State, update func(*entry)) error {
	if o.ended {
		panic(fmt.Sprintf("sandbox: operation on %s ended twice", o.id()))
	}
	o.ended = true
	m, e := o.m, o.e
	m.mu.Lock()
	defer m.mu.Unlock()
	mustTransition(e.state, to)
	e.state = to
	if update != nil {
		update(e)
	}
	err := m.persistLocked(ctx, e)
	switch to {
	case StateRunning:
		m.watchExitLocked(e.rec.ID) // a new incarnation, or the same one again
	case StateKilled:
		m.unwatchExitLocked(e.rec.ID)
		delete(m.boxes, e.rec.ID)
	}
	if e.done != nil {
		close(e.done)
		e.done = nil
	}
	return err
}

// recordError is an end update noting why a sandbox died.
func recordError(err error) func(*entry) {
	return func(e *entry) { e.rec.Error = err.Error() }
}

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
// transient state to, and persists it. It is the only way an operation on
// an existing sandbox may start: whoever wins the claim owns the sandbox
// until the returned op ends. A sandbox in a state not in from gets
// ErrConflict (or ErrNotFound when gone); a failed store write leaves the
// sandbox as it was and is returned.
func (m *Manager) claim(ctx context.Context, id string, to State, from ...State) (*op, error) {
	o, _, err := m.tryClaim(ctx, id, to, from...)
	return o, err
}

// tryClaim is claim, also reporting the state the sandbox was found in.
func (m *Manager) tryClaim(ctx context.Context, id string, to State, from ...State) (*op, State, error) {
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
	if err := m.admitClaimLocked(prev, to); err != nil {
		return nil, prev, err
	}
	mustTransition(prev, to)
	e.state, e.from = to, prev
	if err := m.persistLocked(ctx, e); err != nil {
		e.state = prev
		if errdefs.IsConflict(err) { // another node took it over (takeover.go)
			m.forgetMovedLocked(id)
		}
		return nil, prev, err
	}
	e.done = make(chan struct{})
	if prev == StateRunning && to != StateSnapshotting {
		// Leaving running (kill, pause, rollback): the sandbox's side of its
		// connections is about to vanish; cut them so clients hear about it.
		go m.dataConns.closeAll(id)
	}
	return &op{m: m, e: e, from: prev, undo: cleanup.Stack{Log: m.log}}, prev, nil
}

// busy are the states an operation holds; claimWaiting waits them out.
var busy = []State{StateCreating, StatePausing, StateResuming, StateSnapshotting}

// claimWaiting is claim for operations that should queue behind one in
// progress (a snapshot asked for right after an asynchronous pause) rather
// than fail with ErrConflict.
func (m *Manager) claimWaiting(ctx context.Context, id string, to State, from ...State) (*op, error) {
	for {
		o, prev, err := m.tryClaim(ctx, id, to, from...)
		if err == nil || !errdefs.IsConflict(err) || !slices.Contains(busy, prev) {
			return o, err
		}
		if err := m.waitIdle(ctx, id); err != nil {
			return nil, err
		}
	}
}

// register records a new sandbox in state creating, before any runtime work,
// so a daemon that dies mid-create finds the record and cleans up. The
// sandbox holds its content (rec.Content) from here on: a template deleted
// meanwhile leaves it what it runs on. The returned op is the new
// sandbox's claim.
func (m *Manager) register(ctx context.Context, rec store.Sandbox) (*op, error) {
	if err := m.hold(ctx, sandboxHolder(rec.ID), rec.Content); err != nil {
		return nil, err
	}
	o, err := m.registerLocked(ctx, rec)
	if err != nil && !errors.Is(err, errdefs.ErrAlreadyExists) { // a duplicate's holds are its own
		m.release(ctx, sandboxHolder(rec.ID))
	}
	return o, err
}

func (m *Manager) registerLocked(ctx context.Context, rec store.Sandbox) (*op, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, dup := m.boxes[rec.ID]; dup {
		return nil, fmt.Errorf("sandbox %s: %w", rec.ID, errdefs.ErrAlreadyExists)
	}
	if err := m.admitLocked(1); err != nil {
		return nil, err
	}
	e := &entry{rec: rec, state: StateCreating, done: make(chan struct{})}
	if err := m.persistLocked(ctx, e); err != nil {
		return nil, err
	}
	m.boxes[rec.ID] = e
	return &op{m: m, e: e, from: StateCreating, undo: cleanup.Stack{Log: m.log}}, nil
}

// WaitIdle blocks until no operation holds sandbox id.
func (m *Manager) WaitIdle(ctx context.Context, id string) error { return m.waitIdle(ctx, id) }

// waitIdle blocks until the operation holding id's claim ends.
func (m *Manager) waitIdle(ctx context.Context, id string) error {
	m.mu.Lock()
	e, err := m.lookupLocked(id)
	var done chan struct{}
	if err == nil {
		done = e.done
	}
	m.mu.Unlock()
	if err != nil {
		return err
	}
	if done == nil {
		return nil
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for sandbox %s: %w", id, ctx.Err())
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
