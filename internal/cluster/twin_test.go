package cluster

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/store"
	"github.com/forkbox/forkbox/internal/syncbuf"
)

// TestCheckUniqueRefusesTakenID: the node id of another daemon that runs
// (current lease, another URL, answering there) is refused; every other
// case of an existing record is not.
func TestCheckUniqueRefusesTakenID(t *testing.T) {
	now := time.Date(2026, 12, 6, 4, 0, 0, 0, time.UTC)
	const url = "http://a:3000"
	tests := []struct {
		name    string
		rec     *store.Node // record of "a" before the start; nil: none
		answers func(context.Context, string) bool
		refused bool
	}{
		{"no record", nil, answersYes, false},
		{"live twin elsewhere", &store.Node{URL: "http://b:3000", LeaseUntil: now.Add(5 * time.Second)}, answersYes, true},
		{"twin elsewhere not answering", &store.Node{URL: "http://b:3000", LeaseUntil: now.Add(5 * time.Second)}, answersNo, false},
		{"lease ran out", &store.Node{URL: "http://b:3000", LeaseUntil: now.Add(-time.Second)}, answersYes, false},
		{"own earlier life", &store.Node{URL: url, LeaseUntil: now.Add(5 * time.Second)}, answersYes, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := newFakeStore()
			if tt.rec != nil {
				tt.rec.ID = "a"
				st.nodes["a"] = *tt.rec
			}
			err := CheckUnique(context.Background(), st, "a", url, tt.answers, now)
			if tt.refused {
				if !errdefs.IsConflict(err) || !strings.Contains(err.Error(), "--node-id") || !strings.Contains(err.Error(), "http://b:3000") {
					t.Fatalf("CheckUnique = %v, want a conflict naming the other URL and --node-id", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("CheckUnique = %v", err)
			}
		})
	}
}

func answersYes(context.Context, string) bool { return true }
func answersNo(context.Context, string) bool  { return false }

// TestTwinLogged: two daemons that registered under one id at once are
// each told, as an error logged once, at their next heartbeat.
func TestTwinLogged(t *testing.T) {
	st := newFakeStore()
	var logA, logB syncbuf.Buffer
	a := newRegistry(t, st, "a", &logA)
	b, err := New(Config{Store: st, NodeID: "a", URL: "http://b:3000",
		Logger: slog.New(slog.NewTextHandler(&logB, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.beat(context.Background()); err != nil { // started alongside: no check
		t.Fatal(err)
	}
	for range 3 {
		for _, r := range []*Registry{a, b} {
			if err := r.beat(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
	}
	for name, log := range map[string]*syncbuf.Buffer{"a": &logA, "b": &logB} {
		if n := strings.Count(log.String(), "another daemon heartbeats with this node's id"); n != 1 {
			t.Errorf("node %s logged its twin %d times, want once:\n%s", name, n, log.String())
		}
	}
	if !strings.Contains(logA.String(), "other_url=http://b:3000") {
		t.Errorf("a's log does not name b's URL:\n%s", logA.String())
	}
}
