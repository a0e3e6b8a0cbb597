package cluster

import (
	"context"
	"fmt"
	"time"

	"github.com/forkbox/forkbox/internal/errdefs"
)

// Two daemons given one --node-id would share one record: each heartbeat
// overwrites the other's URL, requests for either's sandboxes go to
// whichever wrote last, and a drain or death of one reads as the other's.
// A daemon is refused at start when the id is taken (CheckUnique), and
// told loudly if another takes it while it runs.

// CheckUnique refuses node id when it belongs to another daemon that
// still runs: its record's lease is current (at now), it advertised
// another URL than url, and it answers there. The same URL is this node's
// earlier life (its listener is bound here now); one that does not answer
// died without ending its lease. A daemon checks before it touches any
// record: recovering under a taken id would take the other's running
// sandboxes for its own lost ones.
func CheckUnique(ctx context.Context, st Store, id, url string, answers func(context.Context, string) bool, now time.Time) error {
	n, err := st.GetNode(ctx, id)
	switch {
	case errdefs.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("read node %s: %w", id, err)
	case n.URL == url || !n.LeaseUntil.After(now) || !answers(ctx, n.URL):
		return nil
	}
	return fmt.Errorf("node id %s is taken by a running daemon at %s (started %s, lease until %s): "+
		"give this daemon another --node-id, or stop that one: %w", id, n.URL,
		n.StartedAt.UTC().Format(time.RFC3339), n.LeaseUntil.UTC().Format(time.RFC3339), errdefs.ErrConflict)
}

// watchTwin looks, before a heartbeat, whether another daemon wrote this
// node's record since the last one (another start time or URL; two
// daemons that started at once both passed CheckUnique) and logs it as an
// error once per twin. Both keep serving: stopping one would end work that
// the operator, not the registry, must choose to end.
func (r *Registry) watchTwin(ctx context.Context) error {
	r.mu.Lock()
	last := r.lastBeat
	r.mu.Unlock()
	if last.IsZero() {
		return nil
	}
	n, err := r.cfg.Store.GetNode(ctx, r.cfg.NodeID)
	if errdefs.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if n.URL == r.cfg.URL && n.StartedAt.UnixMilli() == r.started.UnixMilli() {
		return nil
	}
	twin := fmt.Sprintf("%s started %s", n.URL, n.StartedAt.UTC().Format(time.RFC3339Nano))
	r.mu.Lock()
	seen := r.twin == twin
	r.twin = twin
	r.mu.Unlock()
	if !seen {
		r.cfg.Logger.Error("another daemon heartbeats with this node's id: requests for either's sandboxes reach whichever wrote last; give one of them another --node-id",
			"node", r.cfg.NodeID, "other_url", n.URL, "other_started", n.StartedAt, "this_url", r.cfg.URL)
	}
	return nil
}
