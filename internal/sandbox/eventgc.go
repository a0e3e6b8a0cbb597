package sandbox

import (
	"context"
	"slices"
	"time"

	"github.com/forkbox/forkbox/internal/store"
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
	var others []string
	for _, id := range ids {
		if !m.isLive(id) {
			others = append(others, id)
		}
	}
	// One query per batch rather than one per log: with a cluster's
	// shared logs, every node lists the quiet logs of every node's
	// sandboxes.
	for batch := range slices.Chunk(others, eventGCBatch) {
		recs, _, err := m.st.ListSandboxes(ctx, store.SandboxFilter{IDs: batch})
		if err != nil {
			m.log.Warn("read the records of event logs; kept for now", "err", err)
			return
		}
		byID := make(map[string]*store.Sandbox, len(recs))
		for _, rec := range recs {
			byID[rec.ID] = rec
		}
		for _, id := range batch {
			if !m.logKept(byID[id]) {
				m.removeUnusedLog(id)
			}
		}
	}
}

// eventGCBatch is how many records one query of collectEventLogs reads.
const eventGCBatch = 200

// removeUnusedLog removes id's event log unless id is live by now.
func (m *Manager) removeUnusedLog(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	// Under mu: a create puts its entry in boxes before it logs, so an id
	// that is still not there has nobody writing to its log.
	if _, ok := m.boxes[id]; !ok {
		if err := m.cfg.Events.Remove(id); err != nil {
			m.log.Error("remove event log", "id", id, "err", err)
		}
	}
}

func (m *Manager) isLive(id string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.boxes[id]
	return ok
}

// logKept reports whether record rec (nil: none) keeps its log: a live
// record the map does not hold yet, or a death of its own within the
// retention.
func (m *Manager) logKept(rec *store.Sandbox) bool {
	switch {
	case rec == nil:
		return false
	case State(rec.State) != StateKilled:
		return State(rec.State).Live()
	}
	return rec.KillReason != "" && m.now().Sub(rec.KilledAt) < DefaultDeadLogRetention
}
