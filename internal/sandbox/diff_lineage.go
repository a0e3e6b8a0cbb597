package sandbox

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/store"
)

// Which states a diff or merge compares against come from the lineage:
// a sandbox's files derive from the snapshot it last rolled back to, or
// else the one it was started from, or else its template; a snapshot's
// from its source sandbox's as they were when it was taken. Snapshots are
// immutable, so they (and templates) are the states a merge's base can be.

// history is the lineage, loaded once for one question.
type history struct {
	sbs   map[string]*store.Sandbox
	snaps map[string]*store.Template
	// taken lists each sandbox's snapshots, oldest first.
	taken map[string][]*store.Template
}

func (m *Manager) loadHistory(ctx context.Context) (*history, error) {
	sbs, _, err := m.st.ListSandboxes(ctx, store.SandboxFilter{})
	if err != nil {
		return nil, err
	}
	snaps, err := m.st.ListTemplates(ctx, store.KindSnapshot)
	if err != nil {
		return nil, err
	}
	h := &history{sbs: map[string]*store.Sandbox{}, snaps: map[string]*store.Template{}, taken: map[string][]*store.Template{}}
	for _, s := range sbs {
		h.sbs[s.ID] = s
	}
	for _, t := range snaps {
		h.snaps[t.ID] = t
		h.taken[t.ParentID] = append(h.taken[t.ParentID], t)
	}
	for _, ts := range h.taken {
		sort.Slice(ts, func(i, j int) bool { return ts[i].CreatedAt.Before(ts[j].CreatedAt) })
	}
	return h, nil
}

// origin is the state sandbox sb's files derived from at time at (the
// zero time: now): its last rollback before at, its parent, its template.
func (h *history) origin(sb *store.Sandbox, at time.Time) (id string, since time.Time) {
	for i := len(sb.Rollbacks) - 1; i >= 0; i-- {
		if r := sb.Rollbacks[i]; at.IsZero() || r.At.Before(at) {
			return r.SnapshotID, r.At
		}
	}
	if sb.ParentID != "" {
		return sb.ParentID, sb.StartedAt
	}
	return sb.TemplateID, sb.StartedAt
}

// ancestry lists the immutable states id's files derive from, nearest
// first: for a sandbox its own snapshots since its origin, then the
// origin's ancestry; a template ends it.
func (h *history) ancestry(id string) []string {
	var out []string
	at := time.Time{}
	// A sandbox comes back as the source of each snapshot on the way,
	// each time as it was earlier: seen is by id and time.
	type visit struct {
		id string
		at time.Time
	}
	for seen := map[visit]bool{}; id != "" && !seen[visit{id, at}]; {
		seen[visit{id, at}] = true
		if t, ok := h.snaps[id]; ok {
			out = append(out, id)
			id, at = t.ParentID, t.CreatedAt
			continue
		}
		sb, ok := h.sbs[id]
		if !ok {
			return append(out, id) // a template
		}
		origin, since := h.origin(sb, at)
		own := h.taken[sb.ID]
		for i := len(own) - 1; i >= 0; i-- {
			t := own[i]
			if t.CreatedAt.After(since) && (at.IsZero() || t.CreatedAt.Before(at)) {
				out = append(out, t.ID)
			}
		}
		id = origin
	}
	return out
}

// defaultAgainst is what id is diffed against when the request names
// nothing: a sandbox's origin, a snapshot's source's state before it.
func (h *history) defaultAgainst(id string) (string, error) {
	if sb, ok := h.sbs[id]; ok {
		o, _ := h.origin(sb, time.Time{})
		return o, nil
	}
	if anc := h.ancestry(id); len(anc) > 1 {
		return anc[1], nil
	}
	return "", fmt.Errorf("%s has no parent to diff against: name one with against: %w", id, errdefs.ErrInvalidArgument)
}

// commonAncestor is the nearest state both a and b derive from.
func (h *history) commonAncestor(a, b string) (string, error) {
	inB := map[string]bool{}
	for _, s := range h.ancestry(b) {
		inB[s] = true
	}
	for _, s := range h.ancestry(a) {
		if inB[s] {
			return s, nil
		}
	}
	return "", fmt.Errorf("%s and %s share no ancestor: name a base: %w", a, b, errdefs.ErrInvalidArgument)
}
