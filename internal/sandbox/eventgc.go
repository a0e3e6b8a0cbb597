package sandbox

import (
	"context"
	"time"

	"github.com/forkbox/forkbox/internal/errdefs"
)

// DefaultDeadLogRetention is how long the event log of a sandbox that died
// on its own is kept (its log says why: Logs, the dashboard).
const DefaultDeadLogRetention = 24 * time.Hour

// collectEventLogs removes the event logs no sandbox needs: those of ids
// without a record (a pooled or orphan sandbox logged about on the way
// out), of sandboxes killed without dying on their own (a kill's own
// removal can be outrun by a late line of a racing operation, or cut off
// by a crash; a sandbox lost while the daemon was down never had one), and
// of those that died on their own longer than DefaultDeadLogRetention ago.
func (m *Manager) collectEventLogs(ctx context.Context) {
	ids, err := m.cfg.Events.IDs()
	if err != nil {
		m.log.Error("list event logs", "err", err)
		return
	}
	for _, id := range ids {
		if m.isLive(id) || m.logKept(ctx, id) {
			continue
		}
		m.mu.Lock()
		// Under mu: a create puts its entry in boxes before it logs, so an
		// id that is still not there has nobody writing to its log.
		if _, ok := m.boxes[id]; !ok {
			if err := m.cfg.Events.Remove(id); err != nil {
				m.log.Error("remove event log", "id", id, "err", err)
			}
		}
		m.mu.Unlock()
	}
}

func (m *Manager) isLive(id string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.boxes[id]
	return ok
}

// logKept reports whether the record of id keeps its log: a live record
// the map does not hold yet, or a death of its own within the retention.
// A store that fails keeps the log (it is tried again).
func (m *Manager) logKept(ctx context.Context, id string) bool {
	rec, err := m.st.GetSandbox(ctx, id)
	switch {
	case errdefs.IsNotFound(err):
		return false
	case err != nil:
		return true
	case State(rec.State) != StateKilled:
		return State(rec.State).Live()
	}
	return rec.KillReason != "" && m.now().Sub(rec.KilledAt) < DefaultDeadLogRetention
}
