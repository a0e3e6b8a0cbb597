package sandbox

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/forkbox/forkbox/internal/cleanup"
	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/store"
)

// CloneOptions tune Clone.
type CloneOptions struct {
	// Count is how many copies to make (1..Config.MaxClones).
	Count int
	// Strict makes the call all-or-nothing: if any copy fails, the ones made
	// are killed and the call fails.
	Strict bool
	// Timeout is the copies' TTL; zero inherits the running source's, or the
	// default for a paused source.
	Timeout time.Duration
	// Concurrency bounds parallel restores; zero or more than the
	// daemon's CloneConcurrency means CloneConcurrency.
	Concurrency int
}

// CloneResult reports a Clone: Sandboxes[i] is nil where Errors[i] says why
// copy i failed.
type CloneResult struct {
	Sandboxes  []*Sandbox
	Errors     []error
	SnapshotID string
}

// Clone makes Count isolated running copies of a sandbox: one snapshot
// (a running source is frozen only for its checkpoint; a paused one stays
// paused), then Count restores with bounded concurrency. Copies inherit the
// source's files, memory, metadata and auto-resume, not its auto-pause. The
// generated snapshot is temporary: it goes when the source and every copy
// are gone.
func (m *Manager) Clone(ctx context.Context, id string, o CloneOptions) (_ *CloneResult, err error) {
	defer func(start time.Time) { m.observe(OpClone, start, err) }(m.now())
	if o.Count < 1 || o.Count > m.cfg.MaxClones {
		return nil, fmt.Errorf("count must be between 1 and %d: %w", m.cfg.MaxClones, errdefs.ErrInvalidArgument)
	}
	src, err := m.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	if !m.SpreadsCopies(ctx, id) {
		// All of them here or none, before the snapshot; spread over
		// nodes, each copy is admitted where it lands.
		if err := m.admit(o.Count); err != nil {
			return nil, err
		}
	}
	ttl, err := m.cloneTTL(src, o.Timeout)
	if err != nil {
		return nil, err
	}
	snap, rec, err := m.snapshot(ctx, id, SnapshotOptions{Temporary: true, Origin: OriginClone})
	if err != nil {
		return nil, err
	}
	ctx = context.WithoutCancel(ctx)
	// The snapshot is the clone's to remove while no copy uses it.
	undo := cleanup.New(m.log)
	undo.Add("remove clone snapshot", func(ctx context.Context) error { return m.removeSnapshot(ctx, snap) })
	res := m.restoreCopies(ctx, rec, snap, o.Count, ttl, o.Concurrency)
	switch {
	case o.Strict && res.failed() > 0:
		undo.Add("kill clones", func(ctx context.Context) error { m.killAll(ctx, res.Sandboxes); return nil })
		undo.Run(ctx)
		return nil, fmt.Errorf("%d of %d clones failed (strict): %w", res.failed(), o.Count, res.firstError())
	case res.failed() == o.Count:
		undo.Run(ctx)
	default:
		undo.Disarm()
	}
	m.log.Info("sandbox cloned", "sandbox", id, "copies", o.Count-res.failed(), "failed", res.failed(), "snapshot", snap.ID)
	return res, nil
}

// cloneTTL picks the copies' timeout: the caller's, else what remains of a
// running source's, else the default.
func (m *Manager) cloneTTL(src *Sandbox, d time.Duration) (time.Duration, error) {
	if d != 0 {
		return m.ttl(d)
	}
	if src.State == StateRunning {
		if left := src.EndAt.Sub(m.now()); left > time.Second {
			return left, nil
		}
	}
	return m.cfg.DefaultTimeout, nil
}

func (r *CloneResult) failed() int {
	n := 0
	for _, e := range r.Errors {
		if e != nil {
			n++
		}
	}
	return n
}

func (r *CloneResult) firstError() error {
	for _, e := range r.Errors {
		if e != nil {
			return e
		}
	}
	return errdefs.ErrInternal
}

// restoreCopies starts count sandboxes from snap with bounded concurrency.
func (m *Manager) restoreCopies(ctx context.Context, src store.Sandbox, snap *store.Template, count int, ttl time.Duration, par int) *CloneResult {
	res := &CloneResult{Sandboxes: make([]*Sandbox, count), Errors: make([]error, count), SnapshotID: snap.ID}
	if par <= 0 || par > m.cfg.CloneConcurrency {
		par = m.cfg.CloneConcurrency
	}
	placer := m.copyPlacer(&src)
	sem := make(chan struct{}, par)
	var wg sync.WaitGroup
	for i := range count {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if placer != nil {
				res.Sandboxes[i], res.Errors[i] = m.startCopyOn(ctx, placer, src, snap, ttl)
			} else {
				res.Sandboxes[i], res.Errors[i] = m.restoreCopy(ctx, src, snap, ttl)
			}
		}()
	}
	wg.Wait()
	return res
}

// restoreCopy starts one copy of src from snap.
func (m *Manager) restoreCopy(ctx context.Context, src store.Sandbox, snap *store.Template, ttl time.Duration) (*Sandbox, error) {
	rec := m.copyRecord(src, snap, ttl)
	o, err := m.register(ctx, rec)
	if err != nil {
		return nil, err
	}
	dir, unpin, err := m.openSnapshot(ctx, snap.ID)
	if err == nil {
		err = m.restore(ctx, &o.undo, rec, dir, src.EnvdAccessToken)
		unpin()
	}
	if err != nil {
		return nil, o.fail(ctx, err, StateKilled, recordError(err))
	}
	if err := o.done(ctx, StateRunning, func(e *entry) {
		e.rec.StartedAt = m.now()
		e.rec.EndAt = e.rec.StartedAt.Add(ttl)
	}); err != nil {
		return nil, m.abandon(ctx, rec.ID, err)
	}
	m.log.Info("sandbox created as a clone", "sandbox", rec.ID, "source", src.ID, "snapshot", snap.ID)
	return m.Get(ctx, rec.ID)
}

func (m *Manager) killAll(ctx context.Context, sbs []*Sandbox) {
	for _, sb := range sbs {
		if sb == nil {
			continue
		}
		err := m.killCopy(ctx, sb)
		switch {
		case err == nil || errdefs.IsNotFound(err):
		case errors.Is(err, errdefs.ErrUnavailable) && !m.owns(sb.ClientID):
			m.log.Warn("undo clone: the copy's node does not answer; it is killed once the node answers or is declared dead",
				"sandbox", sb.ID, "node", sb.ClientID, "err", err)
			go m.killCopyLater(ctx, sb)
		default:
			m.log.Error("undo clone", "sandbox", sb.ID, "err", err)
		}
	}
}
