package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/store"
	"github.com/forkbox/forkbox/internal/syncbuf"
)

// fakeStore keeps node records in memory, as *store.Store does, and
// fails every call while down is set.
type fakeStore struct {
	mu    sync.Mutex
	nodes map[string]store.Node
	beats int
	down  bool
}

func newFakeStore() *fakeStore { return &fakeStore{nodes: map[string]store.Node{}} }

var errDown = fmt.Errorf("database: %w", errdefs.ErrUnavailable)

func (f *fakeStore) HeartbeatNode(_ context.Context, n *store.Node) (*store.Node, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		return nil, errDown
	}
	f.beats++
	rec := *n
	rec.Draining = f.nodes[n.ID].Draining
	f.nodes[n.ID] = rec
	return &rec, nil
}

func (f *fakeStore) GetNode(_ context.Context, id string) (*store.Node, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		return nil, errDown
	}
	n, ok := f.nodes[id]
	if !ok {
		return nil, fmt.Errorf("node %q: %w", id, errdefs.ErrNotFound)
	}
	return &n, nil
}

func (f *fakeStore) ListNodes(ctx context.Context) ([]*store.Node, error) {
	f.mu.Lock()
	ids := slices.Sorted(maps.Keys(f.nodes))
	f.mu.Unlock()
	var out []*store.Node
	for _, id := range ids {
		n, err := f.GetNode(ctx, id)
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, nil
}

func (f *fakeStore) SetNodeDraining(ctx context.Context, id string, draining bool) (*store.Node, error) {
	n, err := f.GetNode(ctx, id)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	n.Draining = draining
	f.nodes[id] = *n
	f.mu.Unlock()
	return n, nil
}

func (f *fakeStore) DeleteNode(ctx context.Context, id string, deadBy time.Time) error {
	n, err := f.GetNode(ctx, id)
	if err != nil {
		return err
	}
	if n.LeaseUntil.After(deadBy) {
		return fmt.Errorf("node %s: its lease runs: %w", id, errdefs.ErrConflict)
	}
	f.mu.Lock()
	delete(f.nodes, id)
	f.mu.Unlock()
	return nil
}

func (f *fakeStore) set(down bool) {
	f.mu.Lock()
	f.down = down
	f.mu.Unlock()
}

func (f *fakeStore) heartbeats() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.beats
}

// newRegistry registers node id on st, logging into log.
func newRegistry(t *testing.T, st *fakeStore, id string, log *syncbuf.Buffer) *Registry {
	t.Helper()
	r, err := New(Config{Store: st, NodeID: id, URL: "http://" + id + ":3000",
		Probe:  func() store.Report { return store.Report{Capacity: 10, Running: 2, CPUs: 4} },
		Logger: slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Register(context.Background()); err != nil {
		t.Fatal(err)
	}
	return r
}

func states(t *testing.T, r *Registry) map[string]State {
	t.Helper()
	list, err := r.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]State{}
	for _, n := range list {
		out[n.ID] = n.State
	}
	return out
}

// TestHeartbeatsAndLease: a running registry heartbeats every 2 s with a
// 10 s lease; a node that stops heartbeating is dead once its lease ran
// out, not before; a registry that stops cleanly ends its own lease.
func TestHeartbeatsAndLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, log := newFakeStore(), &syncbuf.Buffer{}
		a := newRegistry(t, st, "node-a", log)
		newRegistry(t, st, "node-b", log) // registers, never runs
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); a.Run(ctx) }()

		time.Sleep(5 * time.Second)
		synctest.Wait()
		if n := st.heartbeats(); n != 4 { // two registrations, beats at 2 s and 4 s
			t.Errorf("heartbeats after 5 s: %d, want 4", n)
		}
		got, _ := a.Get(ctx, "node-a")
		if !got.LeaseUntil.Equal(got.HeartbeatAt.Add(DefaultLease)) || got.Running != 2 || !got.Self || got.URL != "http://node-a:3000" {
			t.Errorf("node-a's record %+v", got)
		}
		if s := states(t, a); s["node-a"] != StateAlive || s["node-b"] != StateAlive {
			t.Errorf("at 5 s: %v, want both alive", s)
		}
		time.Sleep(5 * time.Second) // node-b's lease ends at 10 s
		synctest.Wait()
		if s := states(t, a); s["node-a"] != StateAlive || s["node-b"] != StateDead {
			t.Errorf("at 10 s: %v, want node-b dead", s)
		}
		if c := a.Counts(); c[StateAlive] != 1 || c[StateDead] != 1 || c[StateDraining] != 0 {
			t.Errorf("counts %v", c)
		}
		cancel()
		<-done
		if s := states(t, a); s["node-a"] != StateDead {
			t.Errorf("after a clean stop node-a is %s, want dead at once", s["node-a"])
		}
	})
}

// TestDatabaseOutage: heartbeats that fail are logged once, not fatal;
// the loop goes on, and once the database is back the node heartbeats
// (and is alive) again.
func TestDatabaseOutage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, log := newFakeStore(), &syncbuf.Buffer{}
		a := newRegistry(t, st, "node-a", log)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go a.Run(ctx)
		st.set(true)
		time.Sleep(11 * time.Second)
		synctest.Wait()
		if n := strings.Count(log.String(), "level=WARN"); n != 1 {
			t.Errorf("%d warnings during the outage, want 1:\n%s", n, log)
		}
		if n := strings.Count(log.String(), "node heartbeat failed"); n != 5 {
			t.Errorf("%d failed heartbeats logged, want 5", n)
		}
		if _, err := a.List(ctx); !errors.Is(err, errdefs.ErrUnavailable) {
			t.Errorf("list during the outage: %v", err)
		}
		st.set(false)
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if s := states(t, a); s["node-a"] != StateAlive {
			t.Errorf("after the outage: %v", s)
		}
		if !strings.Contains(log.String(), "node heartbeats recovered") {
			t.Errorf("no recovery logged:\n%s", log)
		}
	})
}

// TestDrain: a drained node refuses new sandboxes with ErrUnavailable
// naming it, whichever node drained it; while the records are away it
// goes by the flag last read; a dead drained node is dead.
func TestDrain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st, log := newFakeStore(), &syncbuf.Buffer{}
		a, b := newRegistry(t, st, "node-a", log), newRegistry(t, st, "node-b", log)
		if err := b.CheckAccepting(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := a.SetDraining(ctx, "nope", true); !errdefs.IsNotFound(err) {
			t.Errorf("drain unknown: %v", err)
		}
		n, err := a.SetDraining(ctx, "node-b", true) // through the other node
		if err != nil || n.State != StateDraining || !n.Draining || n.Self {
			t.Fatalf("drain: %+v %v", n, err)
		}
		err = b.CheckAccepting(ctx)
		if !errors.Is(err, errdefs.ErrUnavailable) || !strings.Contains(err.Error(), "node node-b is draining") {
			t.Fatalf("create on a drained node: %v", err)
		}
		st.set(true)
		if err := b.CheckAccepting(ctx); !errors.Is(err, errdefs.ErrUnavailable) {
			t.Errorf("drained node with the records away: %v", err)
		}
		st.set(false)
		if _, err := b.SetDraining(ctx, "node-b", false); err != nil {
			t.Fatal(err)
		}
		if err := b.CheckAccepting(ctx); err != nil {
			t.Errorf("after undrain: %v", err)
		}
		a.SetDraining(ctx, "node-a", true)
		time.Sleep(DefaultLease)
		if s := states(t, b); s["node-a"] != StateDead {
			t.Errorf("a drained node past its lease is %s, want dead", s["node-a"])
		}
	})
}

func TestNewNeedsIdentity(t *testing.T) {
	if _, err := New(Config{Store: newFakeStore(), NodeID: "a"}); !errdefs.IsInvalidArgument(err) {
		t.Errorf("New without a URL: %v", err)
	}
}

// TestHostReport: the default probe reads this host's free memory and
// CPUs, and names the build.
func TestHostReport(t *testing.T) {
	r := HostReport()
	if r.FreeMemoryMiB <= 0 || r.CPUs <= 0 || r.Version == "" {
		t.Errorf("host report %+v", r)
	}
}

// TestRemove: only a dead node is removed, and only if BeforeRemove lets
// it; an unknown one is ErrNotFound; a removed node that comes back
// registers anew.
func TestRemove(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st, log := newFakeStore(), &syncbuf.Buffer{}
		a, b := newRegistry(t, st, "node-a", log), newRegistry(t, st, "node-b", log)
		if err := a.Remove(ctx, "nope"); !errdefs.IsNotFound(err) {
			t.Errorf("remove unknown: %v", err)
		}
		if err := a.Remove(ctx, "node-b"); !errdefs.IsConflict(err) || !strings.Contains(err.Error(), "node node-b is alive") {
			t.Errorf("remove a live node: %v, want a conflict", err)
		}
		time.Sleep(DefaultLease)
		refused := fmt.Errorf("its sandboxes: %w", errdefs.ErrConflict)
		a.cfg.BeforeRemove = func(context.Context, string) error { return refused }
		if err := a.Remove(ctx, "node-b"); !errors.Is(err, refused) {
			t.Errorf("remove refused by BeforeRemove: %v", err)
		}
		if s := states(t, a); s["node-b"] != StateDead {
			t.Fatalf("after a refused removal: %v", s)
		}
		a.cfg.BeforeRemove = nil
		if err := a.Remove(ctx, "node-b"); err != nil {
			t.Fatalf("remove a dead node: %v", err)
		}
		if s := states(t, a); len(s) != 1 || s["node-a"] != StateDead {
			t.Errorf("after the removal: %v, want node-a alone", s)
		}
		if err := a.Remove(ctx, "node-b"); !errdefs.IsNotFound(err) {
			t.Errorf("remove twice: %v", err)
		}
		if err := b.Register(ctx); err != nil {
			t.Fatal(err)
		}
		if s := states(t, a); s["node-b"] != StateAlive {
			t.Errorf("a removed node back: %v, want it alive", s)
		}
		if !strings.Contains(log.String(), "node removed") {
			t.Errorf("no removal logged:\n%s", log)
		}
	})
}
