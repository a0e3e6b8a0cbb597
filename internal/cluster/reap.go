package cluster

import (
	"context"
	"time"
)

// death is a node whose lease ran out, to be told to Config.OnDead.
type death struct {
	node  string
	url   string
	since time.Time
}

// deathsLocked lists the dead nodes to tell OnDead of at now. Only one
// node does it — the alive node with the smallest id — and only once its
// own heartbeats have succeeded for a whole lease: a node back from a
// database outage (or the database back from a restart) must not declare
// dead the nodes whose leases ran out only because nobody could write.
// A node that stopped cleanly (lease ended at its last heartbeat) is not
// a death: its sandboxes still run and it comes back for them.
func (r *Registry) deathsLocked(now time.Time) []death {
	if r.cfg.OnDead == nil || r.healthySince.IsZero() || now.Sub(r.healthySince) < r.cfg.Lease {
		return nil
	}
	var out []death
	for _, n := range r.nodes {
		if n.State != StateDead && n.ID < r.cfg.NodeID {
			return nil // a live node with a smaller id does it
		}
		if n.State != StateDead || !n.LeaseUntil.After(n.HeartbeatAt) {
			continue
		}
		if at, ok := r.reaped[n.ID]; ok && at.Equal(n.LeaseUntil) {
			continue // told of this death already
		}
		out = append(out, death{n.ID, n.URL, n.LeaseUntil})
	}
	return out
}

// reap tells OnDead of each death; one it failed on is told again at the
// next heartbeat.
func (r *Registry) reap(ctx context.Context, deaths []death) {
	for _, d := range deaths {
		if r.cfg.Answers != nil && r.cfg.Answers(ctx, d.url) {
			// Its heartbeats are late (a loaded host, a slow database),
			// but it runs: its sandboxes are not lost. Asked again at the
			// next heartbeat.
			r.cfg.Logger.Warn("node's lease ran out but it answers at its URL; not declaring it dead", "node", d.node, "url", d.url)
			continue
		}
		if err := r.cfg.OnDead(ctx, d.node, d.since); err != nil {
			r.cfg.Logger.Warn("could not record a dead node's sandboxes as lost; retrying", "node", d.node, "err", err)
			continue
		}
		r.cfg.Logger.Warn("node dead: its lease ran out", "node", d.node, "since", d.since)
		r.mu.Lock()
		r.reaped[d.node] = d.since
		r.mu.Unlock()
	}
}
