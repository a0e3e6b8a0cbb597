package sandbox

import (
	"sort"
	"testing"
	"time"

	"github.com/forkbox/forkbox/internal/store"
)

// lineageFixture: sandbox a from template tpl; snapshot r of a at 1, s0 at
// 2; a rolled back to r at 3; snapshot f of a at 4 (a fork's), sandboxes
// f1, f2 started from f; snapshot g of f1 at 5; b from tpl, unrelated.
func lineageFixture() *history {
	at := func(n int) time.Time { return time.Unix(int64(n), 0) }
	h := &history{sbs: map[string]*store.Sandbox{}, snaps: map[string]*store.Template{}, taken: map[string][]*store.Template{}}
	for _, s := range []*store.Sandbox{
		{ID: "a", TemplateID: "tpl", StartedAt: at(0), Rollbacks: []store.Rollback{{SnapshotID: "r", At: at(3)}}},
		{ID: "f1", ParentID: "f", StartedAt: at(4)},
		{ID: "f2", ParentID: "f", StartedAt: at(4)},
		{ID: "b", TemplateID: "tpl", StartedAt: at(0)},
		{ID: "c", TemplateID: "other", StartedAt: at(0)},
	} {
		h.sbs[s.ID] = s
	}
	for _, t := range []*store.Template{
		{ID: "r", ParentID: "a", CreatedAt: at(1)}, {ID: "s0", ParentID: "a", CreatedAt: at(2)},
		{ID: "f", ParentID: "a", CreatedAt: at(4)}, {ID: "g", ParentID: "f1", CreatedAt: at(5)},
	} {
		h.snaps[t.ID] = t
		h.taken[t.ParentID] = append(h.taken[t.ParentID], t)
	}
	for _, ts := range h.taken {
		sort.Slice(ts, func(i, j int) bool { return ts[i].CreatedAt.Before(ts[j].CreatedAt) })
	}
	return h
}

func TestLineageDefaults(t *testing.T) {
	h := lineageFixture()
	for _, tt := range []struct{ id, against string }{
		{"a", "r"},   // rolled back: its files derive from r
		{"f1", "f"},  // a fork: its snapshot
		{"b", "tpl"}, // from a template
		{"g", "f"},   // a snapshot: its sandbox's state before it
		{"s0", "r"},
	} {
		if got, err := h.defaultAgainst(tt.id); err != nil || got != tt.against {
			t.Errorf("defaultAgainst(%s) = %q, %v; want %q", tt.id, got, err, tt.against)
		}
	}
	for _, tt := range []struct{ from, to, base string }{
		{"f1", "a", "f"}, // the winner of a fork into its parent
		{"f1", "f2", "f"},
		{"g", "f2", "f"},
		{"s0", "a", "r"}, // a snapshot from before a's rollback
		{"b", "a", "tpl"},
		{"c", "a", ""}, // unrelated: no common ancestor
	} {
		got, err := h.commonAncestor(tt.from, tt.to)
		if got != tt.base || (tt.base == "") != (err != nil) {
			t.Errorf("commonAncestor(%s, %s) = %q, %v; want %q", tt.from, tt.to, got, err, tt.base)
		}
	}
}
