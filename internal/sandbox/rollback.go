package sandbox

import (
	"time"

	"context"
	"errors"
	"fmt"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/images"
	"github.com/forkbox/forkbox/internal/runtime"
	"github.com/forkbox/forkbox/internal/store"
)

// Rollback restores a sandbox in place — same id, same address for clients
// — to a snapshot of its own lineage: its files and memory become the
// snapshot's. An unknown sandbox or snapshot is ErrNotFound; a template, or
// a snapshot of another lineage, is ErrInvalidArgument; a busy sandbox is
// waited for. On failure a running sandbox keeps running and a paused one
// stays paused with its pause image — unless the restored state did not
// answer, when the old state is gone and the sandbox is killed.
func (m *Manager) Rollback(ctx context.Context, id, snapshotID string) (_ *Sandbox, err error) {
	defer func(start time.Time) { m.observe(OpRollback, start, err) }(m.now())
	snap, err := m.rollbackTarget(ctx, id, snapshotID)
	if err != nil {
		return nil, err
	}
	o, err := m.claimWaiting(ctx, id, StateResuming, StateRunning, StatePaused)
	if err != nil {
		return nil, err
	}
	ctx = context.WithoutCancel(ctx)
	if err := m.rollbackRuntime(ctx, o, snap); err != nil {
		return nil, err
	}
	paused := o.from == StatePaused
	if err := o.done(ctx, StateRunning, func(e *entry) {
		e.gen++
		e.rec.ImageDir = ""
		e.rec.Rollbacks = append(e.rec.Rollbacks, store.Rollback{SnapshotID: snap.ID, At: m.now().UTC()})
	}); err != nil {
		return nil, err
	}
	if paused {
		m.img.Remove(ctx, images.Pause(id))
	}
	m.log.Info("sandbox rolled back", "sandbox", id, "snapshot", snap.ID)
	return m.Get(ctx, id)
}

// rollbackTarget validates a rollback of sandbox id to snapshotID and
// returns the snapshot.
func (m *Manager) rollbackTarget(ctx context.Context, id, snapshotID string) (*store.Template, error) {
	if snapshotID == "" {
		return nil, fmt.Errorf("snapshotID is required: %w", errdefs.ErrInvalidArgument)
	}
	if _, err := m.Get(ctx, id); err != nil {
		return nil, err
	}
	snap, err := m.st.GetTemplate(ctx, snapshotID)
	if err != nil {
		return nil, fmt.Errorf("snapshot %q: %w", snapshotID, err)
	}
	if snap.Kind != store.KindSnapshot {
		return nil, fmt.Errorf("%s is a template, not a snapshot: %w", snapshotID, errdefs.ErrInvalidArgument)
	}
	if ok, err := m.inLineage(ctx, id, snap); err != nil || !ok {
		return nil, fmt.Errorf("snapshot %s is not of sandbox %s's lineage: %w", snapshotID, id, errdefs.ErrInvalidArgument)
	}
	return snap, nil
}

// rollbackRuntime puts snap's state into the runtime under o's sandbox id.
// A running sandbox is replaced in place, and keeps running unchanged if
// that fails; a paused one has nothing in the runtime and is restored, and
// stays paused with its image if that fails. On failure o has ended.
func (m *Manager) rollbackRuntime(ctx context.Context, o *op, snap *store.Template) error {
	id, token := o.id(), m.imageToken(ctx, snap)
	dir, unpin, err := m.openSnapshot(ctx, snap.ID)
	if err != nil {
		return o.fail(ctx, fmt.Errorf("rollback %s: %w", id, err), o.from, nil)
	}
	defer unpin()
	if o.from != StateRunning {
		if err := m.restore(ctx, &o.undo, o.e.rec, dir, token); err != nil {
			return o.fail(ctx, fmt.Errorf("rollback %s: restore failed, sandbox stays paused: %w", id, err), StatePaused, nil)
		}
		return nil
	}
	cp, err := m.checkpointer()
	var spec runtime.Spec
	if err == nil {
		spec, err = m.spec(ctx, &o.e.rec)
	}
	if err == nil {
		_, err = cp.Replace(ctx, spec, dir)
	}
	if err != nil {
		return o.fail(ctx, fmt.Errorf("rollback %s: %w", id, err), StateRunning, nil)
	}
	if err := m.initAgent(ctx, &o.e.rec, token); err != nil {
		// The old state is gone: the sandbox is lost, which the caller
		// must hear about plainly.
		return errors.Join(fmt.Errorf("rollback %s: restored sandbox did not answer, killed: %w", id, err), m.destroy(ctx, o))
	}
	return nil
}

// inLineage reports whether snap was taken of sandbox id or of one of its
// ancestors (a sandbox it was cloned or restored from, transitively).
func (m *Manager) inLineage(ctx context.Context, id string, snap *store.Template) (bool, error) {
	seen := map[string]bool{}
	cur := id
	for cur != "" && !seen[cur] {
		seen[cur] = true
		if snap.SourceSandboxID == cur || snap.ID == cur {
			return true, nil
		}
		next, err := m.parentOf(ctx, cur)
		if err != nil {
			return false, err
		}
		cur = next
	}
	return false, nil
}

// parentOf returns the parent id of a sandbox or snapshot ("" at a root).
func (m *Manager) parentOf(ctx context.Context, id string) (string, error) {
	if sb, err := m.st.GetSandbox(ctx, id); err == nil {
		return sb.ParentID, nil
	}
	t, err := m.st.GetTemplate(ctx, id)
	if errdefs.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return t.ParentID, nil
}
