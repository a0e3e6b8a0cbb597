package cluster

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/forkbox/forkbox/internal/errdefs"
)

// Placement is the node a new sandbox goes to.
type Placement struct {
	Node string
	URL  string
	// Self is whether it is the node that was asked.
	Self bool
}

// Place picks the node for a new sandbox of a template every node holds:
// of the live nodes that are not draining and have at least
// minFreeMemoryMiB free, the one with the most free slots (capacity −
// running; no capacity: unbounded), then this node, then the smallest id
// (not the most free memory: two readings of one host differ by a few MiB
// and would make the choice random). It reads the records, so a drain holds at once
// (the last heartbeat's listing if they cannot be read), and counts each
// pick as one more sandbox on its node until that node's next heartbeat
// reports it, so a burst of creates spreads over the nodes instead of all
// going to the one that looked emptiest. No node taking new sandboxes is
// ErrUnavailable.
//
// want names the images the sandbox starts from (images.CacheKey,
// images.ContentCacheKey). A node whose last heartbeat reported all of
// them cached counts cacheBonusSlots more free slots than it has (an
// unbounded one stays unbounded) and wins a tie in that count, before
// this node: a download of a pause image or a layer costs more than a
// slightly fuller node, but not more than a much fuller one, and a burst
// still spreads once the caching node's picks use its bonus up. All, not
// any: a restore reads every image it names, so a node missing one
// downloads anyway; the images of one sandbox are cached together.
// Without want there is no preference.
func (r *Registry) Place(ctx context.Context, want ...string) (Placement, error) {
	now := r.cfg.Now()
	list, err := r.cfg.Store.ListNodes(ctx)
	r.mu.Lock()
	defer r.mu.Unlock()
	nodes := r.nodes
	if err == nil {
		nodes = r.views(list, now)
	}
	cands := r.candidatesLocked(nodes, now, want)
	if len(cands) == 0 {
		return Placement{}, fmt.Errorf("no node takes new sandboxes (every node is draining, dead or out of memory): %w", errdefs.ErrUnavailable)
	}
	best := slices.MaxFunc(cands, func(a, b candidate) int {
		return cmp.Or(cmp.Compare(a.slots, b.slots), compareBool(a.cached, b.cached),
			compareBool(a.ID == r.cfg.NodeID, b.ID == r.cfg.NodeID), cmp.Compare(b.ID, a.ID))
	})
	r.picks[best.ID] = append(r.picks[best.ID], now)
	return Placement{Node: best.ID, URL: best.URL, Self: best.ID == r.cfg.NodeID}, nil
}

// candidate is a node placement may pick, with the free slots it counts
// for (pending picks and the cache bonus in) and whether it caches what
// the sandbox wants.
type candidate struct {
	Node
	slots  int
	cached bool
}

// candidatesLocked is the nodes of the listing that take new sandboxes at
// now, as Place weighs them for want.
func (r *Registry) candidatesLocked(nodes []Node, now time.Time, want []string) []candidate {
	var cands []candidate
	for _, n := range nodes {
		st := stateAt(&n.Node, now)
		if n.ID == r.cfg.NodeID && st == StateDead && !n.Draining {
			// This node runs this code: a lease that looks run out is a
			// late heartbeat (a loaded host), not a death.
			st = StateAlive
		}
		if st != StateAlive || n.FreeMemoryMiB < minFreeMemoryMiB {
			continue
		}
		n.Running += r.pendingLocked(n.ID, n.HeartbeatAt)
		c := candidate{Node: n, slots: freeSlots(n), cached: cachesAll(n.Cached, want)}
		if c.cached {
			c.slots = addSlots(c.slots, cacheBonusSlots)
		}
		cands = append(cands, c)
	}
	return cands
}

// cacheBonusSlots is how many free slots a node caching a sandbox's images
// is worth more (see Place): about what a download costs against the
// slower restores of a fuller node.
const cacheBonusSlots = 2

// cachesAll reports whether cached names every key of want (and want any).
func cachesAll(cached, want []string) bool {
	if len(want) == 0 {
		return false
	}
	for _, w := range want {
		if !slices.Contains(cached, w) {
			return false
		}
	}
	return true
}

// addSlots is free + n, staying math.MaxInt (unbounded) on overflow.
func addSlots(free, n int) int {
	if free > math.MaxInt-n {
		return math.MaxInt
	}
	return free + n
}

// pendingLocked counts the picks of node made after its heartbeat at
// beat (which did not report them yet) and forgets the older ones.
func (r *Registry) pendingLocked(node string, beat time.Time) int {
	picks := slices.DeleteFunc(r.picks[node], func(at time.Time) bool { return !at.After(beat) })
	r.picks[node] = picks
	return len(picks)
}

// minFreeMemoryMiB is the free memory below which a node gets no new
// sandboxes whatever its slots say: a restore needs room.
const minFreeMemoryMiB = 512

func freeSlots(n Node) int {
	if n.Capacity <= 0 {
		return math.MaxInt
	}
	return n.Capacity - n.Running
}

func compareBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	default:
		return -1
	}
}
