package sandbox

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/store"
)

// LineageNode is one sandbox or snapshot in a lineage tree.
type LineageNode struct {
	ID        string         `json:"id"`
	Kind      string         `json:"kind"` // "sandbox" or "snapshot"
	ParentID  string         `json:"parentId,omitempty"`
	Origin    string         `json:"origin,omitempty"`
	State     string         `json:"state,omitempty"`
	Name      string         `json:"name,omitempty"`
	CreatedAt time.Time      `json:"createdAt"`
	Rollbacks []Rollback     `json:"rollbacks,omitempty"`
	Children  []*LineageNode `json:"children,omitempty"`
}

// Lineage returns the whole tree id belongs to: from its oldest known
// ancestor down through every snapshot, clone, restore and rollback.
func (m *Manager) Lineage(ctx context.Context, id string) (*LineageNode, error) {
	if _, err := m.st.GetSandbox(ctx, id); err != nil {
		if _, terr := m.st.GetTemplate(ctx, id); terr != nil {
			return nil, err
		}
	}
	nodes, err := m.lineageNodes(ctx)
	if err != nil {
		return nil, err
	}
	root := id
	for seen := map[string]bool{}; !seen[root]; {
		seen[root] = true
		n, ok := nodes[root]
		if !ok || n.ParentID == "" || nodes[n.ParentID] == nil {
			break
		}
		root = n.ParentID
	}
	for _, n := range nodes {
		if p := nodes[n.ParentID]; p != nil && n.ParentID != n.ID {
			p.Children = append(p.Children, n)
		}
	}
	for _, n := range nodes {
		sort.SliceStable(n.Children, func(i, j int) bool {
			return n.Children[i].CreatedAt.Before(n.Children[j].CreatedAt)
		})
	}
	if nodes[root] == nil {
		return nil, fmt.Errorf("lineage of %q: %w", id, errdefs.ErrNotFound)
	}
	return nodes[root], nil
}

// lineageNodes loads every sandbox (killed ones too) and snapshot as nodes,
// in creation order so children come out oldest first.
func (m *Manager) lineageNodes(ctx context.Context) (map[string]*LineageNode, error) {
	sbs, _, err := m.st.ListSandboxes(ctx, store.SandboxFilter{})
	if err != nil {
		return nil, err
	}
	snaps, err := m.st.ListTemplates(ctx, store.KindSnapshot)
	if err != nil {
		return nil, err
	}
	nodes := make(map[string]*LineageNode, len(sbs)+len(snaps))
	for _, t := range snaps {
		n := &LineageNode{ID: t.ID, Kind: "snapshot", ParentID: t.ParentID, Origin: t.Origin, CreatedAt: t.CreatedAt}
		if len(t.Aliases) > 0 {
			n.Name = t.Aliases[0]
		}
		nodes[t.ID] = n
	}
	for _, s := range sbs {
		nodes[s.ID] = &LineageNode{
			ID: s.ID, Kind: "sandbox", ParentID: s.ParentID, Origin: s.Origin,
			State: string(State(s.State).Public()), CreatedAt: s.StartedAt, Rollbacks: rollbacksOf(s.Rollbacks),
		}
	}
	return nodes, nil
}
