package sandbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/images"
	"github.com/forkbox/forkbox/internal/store"
)

// KillReasonNodeLost is the KillReason of a sandbox whose node died: its
// memory and processes were on that node.
const KillReasonNodeLost = "node lost"

// LoseNode records what dead node ran as lost, so no node lists it as
// running any more: its running sandboxes (and those it was creating,
// pausing or killing) become killed with KillReasonNodeLost, and one it
// was resuming or snapshotting from a pause image goes back to paused, as
// does one it was pausing whose image reached the shared store. Its
// paused sandboxes stay paused. since is when the node's lease ran out.
// It returns how many records it changed; every node may call it for the
// same death (the writes are the same).
func (m *Manager) LoseNode(ctx context.Context, node string, since time.Time) (int, error) {
	if m.owns(node) {
		return 0, nil // this node is alive: it is the one asking
	}
	recs, _, err := m.st.ListSandboxes(ctx, store.SandboxFilter{States: liveStates()})
	if err != nil {
		return 0, err
	}
	n := 0
	var errs []error
	for _, rec := range recs {
		if rec.ClientID != node || State(rec.State) == StatePaused {
			continue
		}
		was := rec.State
		if (State(was) == StateResuming || State(was) == StateSnapshotting) && rec.ImageDir != "" || m.pausedBeforeDeath(ctx, rec) {
			rec.State = string(StatePaused)
		} else {
			rec.State, rec.KillReason, rec.KilledAt = string(StateKilled), KillReasonNodeLost, m.now()
			rec.Error = fmt.Sprintf("lost with node %s, whose lease ran out at %s", node, since.UTC().Format(time.RFC3339))
		}
		if err := m.st.PutSandbox(ctx, rec); err != nil {
			errs = append(errs, err)
			continue
		}
		n++
		m.log.Warn("sandbox lost with its node", "sandbox", rec.ID, "node", node, "was", was, "now", rec.State)
	}
	return n, errors.Join(errs...)
}

// pausedBeforeDeath reports whether rec, which its node was pausing when
// it died, has its pause image committed in the shared image store: the
// pause did its work, only its record was not written.
func (m *Manager) pausedBeforeDeath(ctx context.Context, rec *store.Sandbox) bool {
	return m.cfg.SharedImages && State(rec.State) == StatePausing && images.Exists(ctx, m.img, images.Pause(rec.ID))
}

// CheckNodeRemovable is nil if node, dead, may leave the node registry:
// none of its sandboxes is recorded as running. One that is would never
// be recorded lost once its node is gone (LoseNode is told of registered
// nodes only): its death not recorded yet, or a node that stopped cleanly
// and means to come back for them, is ErrConflict.
func (m *Manager) CheckNodeRemovable(ctx context.Context, node string) error {
	recs, _, err := m.st.ListSandboxes(ctx, store.SandboxFilter{States: liveStates()})
	if err != nil {
		return err
	}
	n := 0
	for _, rec := range recs {
		if rec.ClientID == node && State(rec.State) != StatePaused {
			n++
		}
	}
	if n > 0 {
		return fmt.Errorf("node %s still has %d sandbox(es) recorded as running: once its death is recorded (within two leases) they are lost and it can go; a node that stopped cleanly comes back for them, so start it and kill them first: %w",
			node, n, errdefs.ErrConflict)
	}
	return nil
}
