package cluster

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/store"
)

// State is a node's state as the registry reports it.
type State string

// The states of a node. Dead wins over draining: a drained node whose
// lease ran out serves nothing either way.
const (
	// StateAlive: its lease runs, and it takes new sandboxes.
	StateAlive State = "alive"
	// StateDraining: its lease runs, and it takes no new sandboxes.
	StateDraining State = "draining"
	// StateDead: its lease ran out (killed, stopped, or cut off).
	StateDead State = "dead"
)

// States lists every state, in the order metrics report them.
var States = []State{StateAlive, StateDraining, StateDead}

// Node is a node of the registry with its state at the time it was read.
type Node struct {
	store.Node
	State State
	// Self is whether it is the node this registry runs in.
	Self bool
}

// stateAt is the state of n at now.
func stateAt(n *store.Node, now time.Time) State {
	switch {
	case !now.Before(n.LeaseUntil):
		return StateDead
	case n.Draining:
		return StateDraining
	default:
		return StateAlive
	}
}

// view is n as the registry reports it at now.
func (r *Registry) view(n *store.Node, now time.Time) Node {
	return Node{Node: *n, State: stateAt(n, now), Self: n.ID == r.cfg.NodeID}
}

// views is list as the registry reports it at now.
func (r *Registry) views(list []*store.Node, now time.Time) []Node {
	out := make([]Node, 0, len(list))
	for _, n := range list {
		out = append(out, r.view(n, now))
	}
	return out
}

// List returns every node the records hold, dead ones too, by id.
func (r *Registry) List(ctx context.Context) ([]Node, error) {
	list, err := r.cfg.Store.ListNodes(ctx)
	if err != nil {
		return nil, err
	}
	return r.views(list, r.cfg.Now()), nil
}

// Get returns the node with id; an unknown one is ErrNotFound.
func (r *Registry) Get(ctx context.Context, id string) (Node, error) {
	n, err := r.cfg.Store.GetNode(ctx, id)
	if err != nil {
		return Node{}, err
	}
	return r.view(n, r.cfg.Now()), nil
}

// NodeURL returns where the node with id answers and whether its lease
// runs (a draining node still answers for its own sandboxes); an unknown
// node is ErrNotFound. It makes the registry the Manager's directory of
// nodes to forward requests to.
func (r *Registry) NodeURL(ctx context.Context, id string) (string, bool, error) {
	n, err := r.cfg.Store.GetNode(ctx, id)
	if err != nil {
		return "", false, err
	}
	return n.URL, stateAt(n, r.cfg.Now()) != StateDead, nil
}

// SetDraining drains (draining true) or undrains the node with id. Any
// node may drain any other: the flag is in the shared records, and the
// drained node reads it at its next create (CheckAccepting).
func (r *Registry) SetDraining(ctx context.Context, id string, draining bool) (Node, error) {
	n, err := r.cfg.Store.SetNodeDraining(ctx, id, draining)
	if err != nil {
		return Node{}, err
	}
	if id == r.cfg.NodeID {
		r.mu.Lock()
		r.draining = n.Draining
		r.mu.Unlock()
	}
	r.cfg.Logger.Info("node drain set", "node", id, "draining", draining, "by", r.cfg.NodeID)
	return r.view(n, r.cfg.Now()), nil
}

// Remove deletes the dead node with id from the records, so listings and
// metrics stop counting a node retired for good. A node whose lease runs
// is ErrConflict, and so is one Config.BeforeRemove refuses; an unknown
// one is ErrNotFound. A removed node that starts again registers anew.
func (r *Registry) Remove(ctx context.Context, id string) error {
	n, err := r.cfg.Store.GetNode(ctx, id)
	if err != nil {
		return err
	}
	now := r.cfg.Now()
	if st := stateAt(n, now); st != StateDead {
		return fmt.Errorf("node %s is %s: only a dead node can be removed (stop it first; its lease runs until %s): %w",
			id, st, n.LeaseUntil.Format(time.RFC3339), errdefs.ErrConflict)
	}
	if r.cfg.BeforeRemove != nil {
		if err := r.cfg.BeforeRemove(ctx, id); err != nil {
			return err
		}
	}
	if err := r.cfg.Store.DeleteNode(ctx, id, now); err != nil {
		return err
	}
	r.mu.Lock()
	delete(r.reaped, id)
	delete(r.picks, id)
	r.nodes = slices.DeleteFunc(slices.Clone(r.nodes), func(n Node) bool { return n.ID == id })
	r.mu.Unlock()
	r.cfg.Logger.Info("node removed", "node", id, "by", r.cfg.NodeID)
	return nil
}

// CheckAccepting is nil if this node takes new sandboxes, and an
// ErrUnavailable naming the node while it is drained. It reads the flag
// from the records, so a drain sent to any node holds at once; while
// they are unreachable it goes by the flag the last heartbeat read.
func (r *Registry) CheckAccepting(ctx context.Context) error {
	n, err := r.cfg.Store.GetNode(ctx, r.cfg.NodeID)
	r.mu.Lock()
	if err == nil {
		r.draining = n.Draining
	}
	draining := r.draining
	r.mu.Unlock()
	if draining {
		return fmt.Errorf("node %s is draining: it takes no new sandboxes (forkbox node undrain %s): %w",
			r.cfg.NodeID, r.cfg.NodeID, errdefs.ErrUnavailable)
	}
	return nil
}

// Counts returns how many nodes are in each state, from the listing of
// the last successful heartbeat with states as of now: cheap enough for
// every metrics scrape, never a query.
func (r *Registry) Counts() map[State]int {
	c := make(map[State]int, len(States))
	for _, s := range States {
		c[s] = 0
	}
	for _, n := range r.Last() {
		c[n.State]++
	}
	return c
}

// Last returns the nodes as the last successful heartbeat listed them,
// with states as of now (for metrics: never a query).
func (r *Registry) Last() []Node {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.cfg.Now()
	out := make([]Node, 0, len(r.nodes))
	for _, n := range r.nodes {
		n.State = stateAt(&n.Node, now)
		out = append(out, n)
	}
	return out
}
