package sandbox

import (
	"cmp"
	"context"
	"encoding/base64"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/store"
)

// SnapshotFilter selects snapshots for ListSnapshots.
type SnapshotFilter struct {
	// SandboxID keeps the snapshots taken of this sandbox ("": all).
	SandboxID string
	// Name keeps the snapshot with this name or id, optionally qualified
	// by a tag ("name:tag"). forkbox has no tags: a tag other than
	// "default" matches only a name spelled with it.
	Name string
	// Limit caps the page (0: no cap); NextToken continues a listing.
	Limit     int
	NextToken string
}

// ListSnapshots returns snapshots newest first, a page at a time. The page
// token is the position (creation time, id) of the page's last snapshot,
// so snapshots taken or deleted between two pages move nothing.
func (m *Manager) ListSnapshots(ctx context.Context, f SnapshotFilter) ([]*Snapshot, string, error) {
	recs, next, err := m.listSnapshots(ctx, f)
	if err != nil {
		return nil, "", err
	}
	out := make([]*Snapshot, len(recs))
	for i, t := range recs {
		out[i] = snapshotOf(t)
	}
	return out, next, nil
}

// listSnapshots is ListSnapshots on the records.
func (m *Manager) listSnapshots(ctx context.Context, f SnapshotFilter) ([]*store.Template, string, error) {
	after, err := decodeSnapshotToken(f.NextToken)
	if err != nil {
		return nil, "", err
	}
	all, err := m.st.ListTemplates(ctx, store.KindSnapshot)
	if err != nil {
		return nil, "", err
	}
	slices.SortFunc(all, func(a, b *store.Template) int { return -comparePos(posOf(a), posOf(b)) })
	var out []*store.Template
	for _, t := range all {
		if f.NextToken != "" && comparePos(posOf(t), after) >= 0 {
			continue
		}
		if !f.matches(t) {
			continue
		}
		if f.Limit > 0 && len(out) == f.Limit {
			return out, encodeSnapshotToken(posOf(out[len(out)-1])), nil
		}
		out = append(out, t)
	}
	return out, "", nil
}

func (f SnapshotFilter) matches(t *store.Template) bool {
	if f.SandboxID != "" && t.SourceSandboxID != f.SandboxID {
		return false
	}
	if f.Name == "" || f.Name == t.ID || slices.Contains(t.Aliases, f.Name) {
		return true
	}
	base, tag, ok := strings.Cut(f.Name, ":")
	return ok && tag == "default" && (base == t.ID || slices.Contains(t.Aliases, base))
}

// snapshotPos is a snapshot's place in the listing's order.
type snapshotPos struct {
	at time.Time
	id string
}

func posOf(t *store.Template) snapshotPos { return snapshotPos{t.CreatedAt, t.ID} }

func comparePos(a, b snapshotPos) int {
	if c := a.at.Compare(b.at); c != 0 {
		return c
	}
	return cmp.Compare(a.id, b.id)
}

func encodeSnapshotToken(p snapshotPos) string {
	return base64.RawURLEncoding.EncodeToString([]byte("t" + strconv.FormatInt(p.at.UnixNano(), 10) + ":" + p.id))
}

func decodeSnapshotToken(tok string) (snapshotPos, error) {
	if tok == "" {
		return snapshotPos{}, nil
	}
	bad := fmt.Errorf("bad nextToken: %w", errdefs.ErrInvalidArgument)
	raw, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil || len(raw) < 2 || raw[0] != 't' {
		return snapshotPos{}, bad
	}
	ns, id, ok := strings.Cut(string(raw[1:]), ":")
	n, err := strconv.ParseInt(ns, 10, 64)
	if !ok || err != nil || id == "" {
		return snapshotPos{}, bad
	}
	return snapshotPos{time.Unix(0, n), id}, nil
}
