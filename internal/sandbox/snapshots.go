package sandbox

import (
	"context"
	"fmt"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/store"
)

// DeleteSnapshot deletes a snapshot and its image. A temporary snapshot
// (a clone's) cannot be deleted while a live sandbox refers to it.
func (m *Manager) DeleteSnapshot(ctx context.Context, id string) error {
	t, err := m.st.GetTemplate(ctx, id)
	if err != nil {
		return err
	}
	if t.Kind != store.KindSnapshot {
		return fmt.Errorf("template %s is built in, not a snapshot: %w", id, errdefs.ErrForbidden)
	}
	if refs := m.snapshotRefs(t); t.Temporary && len(refs) > 0 {
		return fmt.Errorf("snapshot %s is still used by sandbox %s (%s) and %d more: %w",
			id, refs[0].sandboxID, refs[0].rel, len(refs)-1, errdefs.ErrConflict)
	}
	return m.removeSnapshot(ctx, t)
}

func (m *Manager) removeSnapshot(ctx context.Context, t *store.Template) error {
	if err := m.st.DeleteTemplate(ctx, t.ID); err != nil {
		return err
	}
	if m.deferSnapshotImage(t.ID) {
		m.log.Info("snapshot deleted; its image goes when the operations reading it end", "snapshot", t.ID)
		return nil
	}
	m.dropSnapshotImage(ctx, t.ID)
	m.log.Info("snapshot deleted", "snapshot", t.ID)
	return nil
}

// A snapshotRef is one live reference to a snapshot's image: a sandbox
// that keeps it. Garbage collection and DeleteSnapshot decide from the
// references and the snapshot's typed fields (Temporary, ExpiresAt) only,
// never from how it was made.
type snapshotRef struct {
	sandboxID string
	rel       snapshotRel
}

// snapshotRel is how a sandbox refers to a snapshot.
type snapshotRel string

const (
	// relSource: the snapshot was taken of the sandbox, which may roll
	// back to it.
	relSource snapshotRel = "its source"
	// relStarted: the sandbox was started from the snapshot (created from
	// it, or cloned).
	relStarted snapshotRel = "started from it"
)

// snapshotRefs returns the live references to snapshot t.
func (m *Manager) snapshotRefs(t *store.Template) []snapshotRef {
	m.mu.Lock()
	defer m.mu.Unlock()
	var refs []snapshotRef
	if _, ok := m.boxes[t.SourceSandboxID]; ok {
		refs = append(refs, snapshotRef{t.SourceSandboxID, relSource})
	}
	for id, e := range m.boxes {
		if e.rec.TemplateID == t.ID {
			refs = append(refs, snapshotRef{id, relStarted})
		}
	}
	return refs
}

// inUse reports whether snapshot t has a live reference. In a cluster the
// references may be other nodes' sandboxes (a clone's copies placed there,
// a create from the snapshot): the shared records are asked too, so no
// node collects a snapshot another node's sandbox started from.
func (m *Manager) inUse(t *store.Template) bool {
	if len(m.snapshotRefs(t)) > 0 {
		return true
	}
	if m.nodes.Load() == nil {
		return false
	}
	ctx := context.Background()
	if src, err := m.st.GetSandbox(ctx, t.SourceSandboxID); err == nil && State(src.State).Live() {
		return true
	}
	started, _, err := m.st.ListSandboxes(ctx, store.SandboxFilter{States: liveStates(), Templates: []string{t.ID}, Limit: 1})
	return err != nil || len(started) > 0 // unreadable records: in use, to be safe
}

// collectSnapshot removes a temporary snapshot once nothing uses it.
func (m *Manager) collectSnapshot(ctx context.Context, id string) {
	t, err := m.st.GetTemplate(ctx, id)
	if err != nil || !t.Temporary || m.inUse(t) {
		return
	}
	if err := m.removeSnapshot(ctx, t); err != nil {
		m.log.Error("collect snapshot", "snapshot", id, "err", err)
	}
}

// collectSnapshots deletes temporary snapshots nobody uses any more and
// snapshots past their TTL that nobody uses, so images cannot leak.
func (m *Manager) collectSnapshots(ctx context.Context) {
	all, err := m.st.ListTemplates(ctx, store.KindSnapshot)
	if err != nil {
		m.log.Error("list snapshots for collection", "err", err)
		return
	}
	now := m.now()
	for _, t := range all {
		expired := !t.ExpiresAt.IsZero() && !now.Before(t.ExpiresAt)
		if (t.Temporary || expired) && !m.inUse(t) {
			if err := m.removeSnapshot(ctx, t); err != nil {
				m.log.Error("collect snapshot", "snapshot", t.ID, "err", err)
			}
		}
	}
}
