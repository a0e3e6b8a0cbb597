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
	if prev == StateRunning {
		if err := m.rt.Delete(ctx, id); err != nil && !errdefs.IsNotFound(err) {
			m.release(ctx, e, StateRunning, nil)
			return nil, fmt.Errorf("rollback %s: %w", id, err)
		}
	}
	if err := m.restore(ctx, e.rec, snap.ImageDir, m.imageToken(ctx, snap)); err != nil {
		// The old state is gone (a running sandbox was deleted): the sandbox
		// is lost, which the caller must hear about plainly.
		m.destroy(ctx, e)
		return nil, fmt.Errorf("rollback %s: restore failed, sandbox killed: %w", id, err)
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
