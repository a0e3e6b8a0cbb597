package cluster

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/store"
)

// registerWith registers node id reporting rep, at a clock off by skew.
func registerWith(t *testing.T, st *fakeStore, id string, rep store.Report, skew time.Duration) *Registry {
	t.Helper()
	r, err := New(Config{Store: st, NodeID: id, URL: "http://" + id, Probe: func() store.Report { return rep },
		Now: func() time.Time { return time.Now().Add(skew) }, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Register(context.Background()); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestPlace: creates go to the live, undrained node with the most free
// slots; a burst spreads (each pick counts until the next heartbeat);
// ties go to the node asked; draining and dead nodes get nothing, a
// drain holding at once; with no node taking sandboxes it is
// ErrUnavailable.
func TestPlace(t *testing.T) {
	ctx := context.Background()
	st := newFakeStore()
	rep := func(running int) store.Report {
		return store.Report{Capacity: 10, Running: running, FreeMemoryMiB: 1000}
	}
	registerWith(t, st, "node-b", rep(2), 0)
	registerWith(t, st, "node-c", rep(0), 0)
	registerWith(t, st, "node-d", rep(0), -time.Hour) // its lease ran out long ago
	if _, err := st.SetNodeDraining(ctx, "node-c", true); err != nil {
		t.Fatal(err)
	}
	a := registerWith(t, st, "node-a", rep(8), 0)
	var got []string
	for range 8 {
		p, err := a.Place(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if p.Self != (p.Node == "node-a") || p.URL != "http://"+p.Node {
			t.Errorf("placement %+v", p)
		}
		got = append(got, p.Node)
	}
	want := []string{"node-b", "node-b", "node-b", "node-b", "node-b", "node-b", "node-a", "node-b"}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("placements %v, want %v", got, want)
		}
	}
	for _, id := range []string{"node-a", "node-b"} {
		if _, err := st.SetNodeDraining(ctx, id, true); err != nil {
			t.Fatal(err)
		}
	}
	if p, err := a.Place(ctx); !errors.Is(err, errdefs.ErrUnavailable) {
		t.Errorf("every node draining or dead: %+v, %v; want ErrUnavailable", p, err)
	}
}

// TestPlaceSelfWithLateHeartbeat: the node placing is alive whatever its
// own lease says (its heartbeat is only late on a loaded host): it still
// takes the sandbox when no other node does.
func TestPlaceSelfWithLateHeartbeat(t *testing.T) {
	st := newFakeStore()
	var mu sync.Mutex
	now := time.Now()
	a, err := New(Config{Store: st, NodeID: "node-a", URL: "http://node-a",
		Probe: func() store.Report { return store.Report{Capacity: 10, FreeMemoryMiB: 1000} },
		Now: func() time.Time {
			mu.Lock()
			defer mu.Unlock()
			return now
		}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Register(context.Background()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	now = now.Add(time.Minute) // no heartbeat for a minute: the lease ran out
	mu.Unlock()
	if n, err := a.Get(context.Background(), "node-a"); err != nil || n.State != StateDead {
		t.Fatalf("node-a after a minute without heartbeats: %+v %v, want shown dead", n, err)
	}
	p, err := a.Place(context.Background())
	if err != nil || !p.Self {
		t.Errorf("placement with this node's own lease run out: %+v, %v; want this node", p, err)
	}
}

// TestPlaceCacheAware: a node whose heartbeat reports every wanted image
// cached counts cacheBonusSlots more free slots and wins a tie, even over
// the node asked and among unbounded nodes; it loses to a node with more
// than that many more; one caching only some of them gets nothing; a
// burst still spreads; a draining caching node gets nothing.
func TestPlaceCacheAware(t *testing.T) {
	const pause, layer = "images/pause/p", "content/layer/l"
	type node struct {
		id                string
		capacity, running int
		cached            []string
		draining          bool
	}
	cases := []struct {
		name  string
		nodes []node
		want  []string
		picks []string
	}{
		{"tie goes to the caching node", []node{{"node-a", 10, 5, nil, false}, {"node-b", 10, 5, []string{layer, pause}, false}},
			[]string{pause, layer}, []string{"node-b"}},
		{"no wanted keys: no preference", []node{{"node-a", 10, 5, nil, false}, {"node-b", 10, 5, []string{pause}, false}},
			nil, []string{"node-a"}},
		{"bonus worth two slots", []node{{"node-a", 10, 5, nil, false}, {"node-b", 10, 7, []string{pause}, false}},
			[]string{pause}, []string{"node-b"}},
		{"loses to three more free slots", []node{{"node-a", 10, 5, nil, false}, {"node-b", 10, 8, []string{pause}, false}},
			[]string{pause}, []string{"node-a"}},
		{"all wanted keys, not some", []node{{"node-a", 10, 5, nil, false}, {"node-b", 10, 5, []string{pause}, false}},
			[]string{pause, layer}, []string{"node-a"}},
		{"unbounded: caching node before this one", []node{{"node-a", 0, 5, nil, false}, {"node-b", 0, 9, []string{pause}, false}},
			[]string{pause}, []string{"node-b", "node-b"}},
		{"draining caching node", []node{{"node-a", 10, 9, nil, false}, {"node-b", 10, 0, []string{pause}, true}},
			[]string{pause}, []string{"node-a"}},
		{"burst spreads", []node{{"node-a", 10, 5, nil, false}, {"node-b", 10, 5, []string{pause}, false}},
			[]string{pause}, []string{"node-b", "node-b", "node-b", "node-a", "node-b", "node-a", "node-b", "node-a"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			st := newFakeStore()
			var a *Registry
			for _, n := range c.nodes {
				r := registerWith(t, st, n.id, store.Report{Capacity: n.capacity, Running: n.running, FreeMemoryMiB: 1000, Cached: n.cached}, 0)
				if n.id == "node-a" {
					a = r
				}
				if _, err := st.SetNodeDraining(ctx, n.id, n.draining); err != nil {
					t.Fatal(err)
				}
			}
			var got []string
			for range c.picks {
				p, err := a.Place(ctx, c.want...)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, p.Node)
			}
			if !slices.Equal(got, c.picks) {
				t.Errorf("placements %v, want %v", got, c.picks)
			}
		})
	}
}
