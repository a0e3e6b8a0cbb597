package sandbox

import (
	"context"
	"fmt"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/store"
)

// Rollback restores a sandbox in place — same id, same address for clients
// — to a snapshot of its own lineage: its files and memory become the
// snapshot's. A snapshot of another lineage is ErrInvalidArgument.
func (m *Manager) Rollback(ctx context.Context, id, snapshotID string) (*Sandbox, error) {
	if snapshotID == "" {
		return nil, fmt.Errorf("snapshotID is required: %w", errdefs.ErrInvalidArgument)
	}
	snap, err := m.st.GetTemplate(ctx, snapshotID)
	if err != nil || snap.Kind != store.KindSnapshot {
		return nil, fmt.Errorf("snapshot %q: %w", snapshotID, errdefs.ErrInvalidArgument)
	}
	if ok, err := m.inLineage(ctx, id, snap); err != nil || !ok {
		return nil, fmt.Errorf("snapshot %s is not of sandbox %s's lineage: %w", snapshotID, id, errdefs.ErrInvalidArgument)
	}
	e, prev, err := m.claimWaiting(ctx, id, StateResuming, StateRunning, StatePaused)
	if err != nil {
		return nil, err
	}
	ctx = context.WithoutCancel(ctx)
	if err := m.rollbackRuntime(ctx, e, prev, snap); err != nil {
		return nil, err
	}
	old := e.rec.ImageDir
	m.release(ctx, e, StateRunning, func(e *entry) {
		e.gen++
		e.rec.ImageDir = ""
		e.rec.Rollbacks = append(e.rec.Rollbacks, store.Rollback{SnapshotID: snap.ID, At: m.now().UTC()})
	})
	if old != "" {
		removeAll(old)
	}
	m.log.Info("sandbox rolled back", "sandbox", id, "snapshot", snap.ID)
	return m.Get(ctx, id)
}

// rollbackRuntime puts snap's state into the runtime under e's id. A
// running sandbox is replaced in place, and keeps running unchanged if
// that fails; a paused one has nothing in the runtime and is restored.
// Either way e is released or destroyed on failure.
func (m *Manager) rollbackRuntime(ctx context.Context, e *entry, prev State, snap *store.Template) error {
	id, token := e.rec.ID, m.imageToken(ctx, snap)
	if prev != StateRunning {
		if err := m.restore(ctx, e.rec, snap.ImageDir, token); err != nil {
			m.destroy(ctx, e)
			return fmt.Errorf("rollback %s: restore failed, sandbox killed: %w", id, err)
		}
		return nil
	}
	cp, err := m.checkpointer()
	if err == nil {
		_, err = cp.Replace(ctx, m.spec(&e.rec), snap.ImageDir)
	}
	if err != nil {
		m.release(ctx, e, StateRunning, nil)
		return fmt.Errorf("rollback %s: %w", id, err)
	}
	if err := m.initAgent(ctx, &e.rec, token); err != nil {
		// The old state is gone: the sandbox is lost, which the caller
		// must hear about plainly.
		m.destroy(ctx, e)
		return fmt.Errorf("rollback %s: restored sandbox did not answer, killed: %w", id, err)
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
