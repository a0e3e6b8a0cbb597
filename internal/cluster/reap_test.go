package cluster

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forkbox/forkbox/internal/store"
	"github.com/forkbox/forkbox/internal/syncbuf"
)

// deathLog records what a registry's OnDead was told.
type deathLog struct {
	mu   sync.Mutex
	told []string
}

func (d *deathLog) onDead(_ context.Context, node string, _ time.Time) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.told = append(d.told, node)
	return nil
}

func (d *deathLog) list() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.told...)
}

// runReaper registers and runs node id with OnDead set until ctx ends,
// heartbeating every beat.
func runReaper(t *testing.T, ctx context.Context, st *fakeStore, id string, beat time.Duration, d *deathLog,
	answers func(context.Context, string) bool) {
	t.Helper()
	r, err := New(Config{Store: st, NodeID: id, URL: "http://" + id, OnDead: d.onDead, Heartbeat: beat, Answers: answers,
		Probe: func() store.Report { return store.Report{} }, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Register(ctx); err != nil {
		t.Fatal(err)
	}
	go r.Run(ctx)
}

// TestOnDead: of the live nodes only the one with the smallest id tells
// of a death, once; a node that stopped cleanly is no death; and after a
// database outage that let every lease run out, nobody is declared dead
// (the reaper first waits a whole lease of its own heartbeats).
func TestOnDead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newFakeStore()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		a, z := &deathLog{}, &deathLog{}
		runReaper(t, ctx, st, "node-a", 2*time.Second, a, nil)
		// node-z beats less often: after the outage node-a is back first
		// and sees node-z's lease run out before node-z renews it.
		runReaper(t, ctx, st, "node-z", 6*time.Second, z, nil)
		newRegistry(t, st, "node-b", &syncbuf.Buffer{}) // registers, never beats again
		c := newRegistry(t, st, "node-c", &syncbuf.Buffer{})
		c.expire(ctx) // a clean stop
		time.Sleep(20 * time.Second)
		synctest.Wait()
		if got := a.list(); len(got) != 1 || got[0] != "node-b" {
			t.Errorf("node-a was told of %v, want node-b once", got)
		}
		if got := z.list(); len(got) != 0 {
			t.Errorf("node-z (not the smallest live id) was told of %v", got)
		}
		st.set(true)
		time.Sleep(13 * time.Second) // every lease runs out
		st.set(false)
		time.Sleep(20 * time.Second)
		synctest.Wait()
		if got := a.list(); len(got) != 1 {
			t.Errorf("after the outage node-a was told of %v, want still only node-b", got)
		}
		if s := states(t, c); s["node-z"] != StateAlive {
			t.Errorf("node-z after the outage: %s", s["node-z"])
		}
	})
}

// TestOnDeadSparesANodeThatAnswers: a node whose lease ran out but which
// still answers at its URL (heartbeats late on a loaded host) is not
// declared dead; once it stops answering, it is, once.
func TestOnDeadSparesANodeThatAnswers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newFakeStore()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var mu sync.Mutex
		answers := true
		d := &deathLog{}
		runReaper(t, ctx, st, "node-a", DefaultHeartbeat, d, func(_ context.Context, url string) bool {
			mu.Lock()
			defer mu.Unlock()
			return url == "http://node-b:3000" && answers
		})
		newRegistry(t, st, "node-b", &syncbuf.Buffer{}) // registers, never beats again
		time.Sleep(30 * time.Second)
		synctest.Wait()
		if got := d.list(); len(got) != 0 {
			t.Errorf("a node that answers was declared dead: %v", got)
		}
		mu.Lock()
		answers = false
		mu.Unlock()
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if got := d.list(); len(got) != 1 || got[0] != "node-b" {
			t.Errorf("once it stopped answering: told of %v, want node-b once", got)
		}
	})
}
