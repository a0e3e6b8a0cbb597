package sandbox

import (
	"context"
	"fmt"
	"slices"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/store"
)

// NodeDirectory tells where the other nodes of a cluster answer (the
// node registry of a shared database).
type NodeDirectory interface {
	// NodeURL returns node's advertised base URL and whether its lease
	// is current; an unknown node is ErrNotFound.
	NodeURL(ctx context.Context, node string) (url string, alive bool, err error)
}

// SetNodeDirectory makes requests for the sandboxes of the cluster's other
// nodes go to those nodes (OwnerURL). The node registry is made after the
// Manager (it reports the Manager's counts), hence a setter; without it
// the Manager is a node of its own.
func (m *Manager) SetNodeDirectory(d NodeDirectory) { m.nodes.Store(&d) }

// OwnerURL returns where a request for sandbox id must go when another
// node of the cluster runs it: that node's base URL, or "" when this node
// answers (it runs the sandbox, or nobody does: the local handler then
// gives its usual answer). A sandbox of a node whose lease ran out is
// ErrUnavailable: its memory was on that node.
func (m *Manager) OwnerURL(ctx context.Context, id string) (string, error) {
	nodes := m.nodes.Load()
	if nodes == nil {
		return "", nil
	}
	// Twice at most: a takeover lost to another node is followed by a
	// second look, which forwards to the winner.
	for range 2 {
		rec, err := m.unloaded(ctx, id)
		if rec == nil || err != nil {
			return "", err
		}
		url, err := m.ownerOf(ctx, *nodes, rec)
		if !errdefs.IsConflict(err) {
			return url, err
		}
	}
	return "", fmt.Errorf("sandbox %s is changing nodes; try again: %w", id, errdefs.ErrConflict)
}

// unloaded returns sandbox id's record when this node does not have the
// sandbox loaded; nil when it does, or when no record has the id.
func (m *Manager) unloaded(ctx context.Context, id string) (*store.Sandbox, error) {
	m.mu.Lock()
	_, local := m.boxes[id]
	m.mu.Unlock()
	if local {
		return nil, nil
	}
	rec, err := m.st.GetSandbox(ctx, id)
	if errdefs.IsNotFound(err) {
		return nil, nil
	}
	return rec, err
}

// ownerOf is OwnerURL for sandbox rec, not loaded here: a paused one this
// node was handed is loaded, one of a dead node taken over (shared images
// only); ErrConflict means a takeover lost a race, to look again.
func (m *Manager) ownerOf(ctx context.Context, nodes NodeDirectory, rec *store.Sandbox) (string, error) {
	if m.owns(rec.ClientID) {
		return "", m.loadHandedOver(ctx, rec)
	}
	if !State(rec.State).Live() {
		return "", nil
	}
	url, alive, err := nodes.NodeURL(ctx, rec.ClientID)
	switch {
	case err != nil && !errdefs.IsNotFound(err):
		return "", err
	case alive:
		return url, nil
	case State(rec.State) == StatePaused && m.cfg.SharedImages:
		return "", m.takeOver(ctx, rec)
	case errdefs.IsNotFound(err):
		return "", fmt.Errorf("sandbox %s belongs to node %s, which is not registered: %w", rec.ID, rec.ClientID, errdefs.ErrUnavailable)
	}
	return "", fmt.Errorf("sandbox %s belongs to node %s, whose lease ran out (the node is dead): %w", rec.ID, rec.ClientID, errdefs.ErrUnavailable)
}

// Placeable reports whether a create from templateID (an id or alias)
// may be placed on any node of the cluster: there is a
// cluster (SetNodeDirectory) and every node holds the template (one of
// Config.SharedTemplates), or the nodes share their images (Config.
// SharedImages). Otherwise other templates and snapshots live on the node
// that made them, which must create from them itself.
func (m *Manager) Placeable(ctx context.Context, templateID string) bool {
	if m.nodes.Load() == nil || templateID == "" {
		return false
	}
	tpl, err := m.st.GetTemplate(ctx, templateID)
	return err == nil && (m.cfg.SharedImages || slices.Contains(m.cfg.SharedTemplates, tpl.ID))
}
