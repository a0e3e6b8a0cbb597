package sandbox

import (
	"context"
	"fmt"
	"time"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/images"
	"github.com/forkbox/forkbox/internal/store"
)

// CopyPlacer spreads a clone's copies over the nodes of a cluster whose
// images are shared (Config.SharedImages): the clone's snapshot is in the
// object store, so any node can start a copy from it. The server
// implements it (node-to-node requests); without one every copy starts
// on the source's node.
type CopyPlacer interface {
	// PlaceCopy picks the node one copy starts on: "" is this node. want
	// names the images the copy restores from (the snapshot's image and
	// the source's layer, as images.CacheKey names them), so placement
	// can prefer a node that caches them.
	PlaceCopy(ctx context.Context, want []string) (node string, err error)
	// StartCopy has node start a copy of sandbox src from snapshot snap
	// (StartCopy there) and returns the copy's id.
	StartCopy(ctx context.Context, node, src, snap string, ttl time.Duration) (id string, err error)
	// KillCopy kills sandbox id, which node runs.
	KillCopy(ctx context.Context, node, id string) error
}

// SetCopyPlacer makes clones spread their copies over the cluster's nodes
// (only with Config.SharedImages).
func (m *Manager) SetCopyPlacer(p CopyPlacer) { m.copies.Store(&p) }

// copyPlacer returns the placer to spread src's copies with, nil to start
// them all here: no cluster, images not shared, or a source with volumes
// (a volume lives on its node's disk).
func (m *Manager) copyPlacer(src *store.Sandbox) CopyPlacer {
	p := m.copies.Load()
	if p == nil || !m.cfg.SharedImages || len(src.Volumes) > 0 {
		return nil
	}
	return *p
}

// SpreadsCopies reports whether a clone of sandbox id starts its copies on
// the nodes placement picks (a drained node may then clone: its copies
// go elsewhere).
func (m *Manager) SpreadsCopies(ctx context.Context, id string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.boxes[id]
	return ok && m.copyPlacer(&e.rec) != nil
}

// StartCopy starts, on this node, a copy of sandbox srcID (which may run
// on another node) from snapshot snapID with TTL ttl: the other end of
// CopyPlacer.StartCopy.
func (m *Manager) StartCopy(ctx context.Context, srcID, snapID string, ttl time.Duration) (*Sandbox, error) {
	src, err := m.st.GetSandbox(ctx, srcID)
	if err != nil {
		return nil, err
	}
	snap, err := m.st.GetTemplate(ctx, snapID)
	if err != nil {
		return nil, err
	}
	if snap.Kind != store.KindSnapshot {
		return nil, fmt.Errorf("%s is not a snapshot: %w", snapID, errdefs.ErrInvalidArgument)
	}
	if ttl, err = m.ttl(ttl); err != nil {
		return nil, err
	}
	return m.restoreCopy(ctx, *src, snap, ttl)
}

// startCopyOn starts one copy of src from snap where p places it.
func (m *Manager) startCopyOn(ctx context.Context, p CopyPlacer, src store.Sandbox, snap *store.Template, ttl time.Duration) (*Sandbox, error) {
	node, err := p.PlaceCopy(ctx, restoreKeys(images.Snapshot(snap.ID), src.Content))
	if err != nil {
		return nil, err
	}
	if node == "" || node == m.cfg.ClientID {
		return m.restoreCopy(ctx, src, snap, ttl)
	}
	id, err := p.StartCopy(ctx, node, src.ID, snap.ID, ttl)
	if err != nil {
		return nil, fmt.Errorf("copy on node %s: %w", node, err)
	}
	rec, err := m.st.GetSandbox(ctx, id)
	if err != nil {
		return nil, err
	}
	m.log.Info("sandbox created as a clone on another node", "sandbox", id, "node", node, "source", src.ID)
	return sandboxOf(rec, State(rec.State)), nil
}

// killCopy kills a copy of a failed strict clone, wherever it runs.
func (m *Manager) killCopy(ctx context.Context, sb *Sandbox) error {
	if p := m.copies.Load(); p != nil && sb.ClientID != "" && !m.owns(sb.ClientID) {
		return (*p).KillCopy(ctx, sb.ClientID, sb.ID)
	}
	return m.Kill(ctx, sb.ID)
}

// copyKillRetry is how often the undo of a failed strict clone asks a
// node that did not answer again to kill its copy; copyKillPatience how
// long it goes on (a node's lease runs out well before).
const (
	copyKillRetry    = 2 * time.Second
	copyKillPatience = 10 * time.Minute
)

// killCopyLater kills copy sb of a failed strict clone, which runs on a
// node that did not answer (killed -9, cut off): once the node answers
// again (a quick restart brings its sandboxes back), or not at all once
// its record says it is gone (the node was declared dead and its
// sandboxes lost; its restart then removes them). Without this the copy
// of a clone the client saw fail would run on after such a restart.
func (m *Manager) killCopyLater(ctx context.Context, sb *Sandbox) {
	done := ctx.Done()
	if run := m.pool.runCtx.Load(); run != nil {
		done = (*run).Done()
	}
	t := time.NewTicker(copyKillRetry)
	defer t.Stop()
	for deadline := m.now().Add(copyKillPatience); m.now().Before(deadline); {
		select {
		case <-done:
			return
		case <-t.C:
		}
		rec, err := m.st.GetSandbox(ctx, sb.ID)
		if errdefs.IsNotFound(err) || (err == nil && State(rec.State) == StateKilled) {
			return
		}
		if err := m.killCopy(ctx, sb); err == nil || errdefs.IsNotFound(err) {
			m.log.Info("undo clone: copy killed on its node", "sandbox", sb.ID, "node", sb.ClientID)
			return
		}
	}
	m.log.Error("undo clone: gave up killing a copy on a node that never answered", "sandbox", sb.ID, "node", sb.ClientID)
}
