package sandbox

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/images"
	"github.com/forkbox/forkbox/internal/store"
)

// This file moves paused sandboxes between the nodes of a cluster whose
// images are shared (Config.SharedImages: one object store and one
// database). A paused sandbox is only records and an image in the object
// store, so a move is one conditional update of its record
// (store.TransferSandbox): a node takes over the paused sandboxes of a
// dead node when they are asked for (OwnerURL), and a drained node hands
// its paused sandboxes to the others (HandOffPaused). The new owner loads
// the sandbox when it is first asked for; its resume fetches the image.
// The database keeps the move atomic: of nodes racing to take one sandbox
// over exactly one wins, and the old owner's writes are refused after it
// (so it can never resume the sandbox too).

// holderMover is what an image store that tracks holders per daemon (the
// object store) does when a holder moves between daemons.
type holderMover interface {
	AdoptHolder(ctx context.Context, h images.Holder) error
	DisownHolder(h images.Holder)
}

// takeOver moves paused sandbox rec of a dead node to this one and loads
// it. ErrConflict means another node (or the owner) was first.
func (m *Manager) takeOver(ctx context.Context, rec *store.Sandbox) error {
	if len(rec.Volumes) > 0 {
		return fmt.Errorf("sandbox %s mounts volumes of node %s, which is dead: %w", rec.ID, rec.ClientID, errdefs.ErrUnavailable)
	}
	moved, err := m.st.TransferSandbox(ctx, rec.ID, rec.ClientID, m.cfg.ClientID, string(StatePaused))
	if err != nil {
		return err
	}
	m.log.Warn("took over a paused sandbox of a dead node", "sandbox", rec.ID, "node", rec.ClientID)
	return m.loadPaused(ctx, moved)
}

// loadPaused makes paused sandbox rec, recorded as this node's but not
// known here (taken over, or handed over by a drained node), one of this
// node's: its pause image is fetched (a files-only pause and a diff read
// it here) and its references become this node's.
func (m *Manager) loadPaused(ctx context.Context, rec *store.Sandbox) error {
	dir, err := m.img.Open(ctx, images.Pause(rec.ID))
	if err != nil {
		return fmt.Errorf("sandbox %s: its pause image: %w", rec.ID, err)
	}
	h := sandboxHolder(rec.ID)
	m.setRecorded(ctx, h, rec.Content)
	if mv, ok := m.content.(holderMover); ok {
		if err := mv.AdoptHolder(ctx, h); err != nil {
			m.log.Warn("could not mark a taken-over sandbox's content as this node's", "sandbox", rec.ID, "err", err)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.boxes[rec.ID]; !ok {
		e := &entry{rec: *rec, state: StatePaused}
		e.rec.ImageDir = dir
		m.boxes[rec.ID] = e
	}
	return nil
}

// LoadOwned loads sandbox id when the records say it is this node's and
// paused but this node does not know it yet (handed or taken over just
// now): a request another node forwarded here as to the owner.
func (m *Manager) LoadOwned(ctx context.Context, id string) error {
	rec, err := m.unloaded(ctx, id)
	if rec == nil || err != nil || !m.owns(rec.ClientID) {
		return err
	}
	return m.loadHandedOver(ctx, rec)
}

// loadHandedOver loads rec, a record of this node's that it does not have
// loaded, when it is a paused sandbox of shared images (handed or taken
// over); any other such record is nothing to load.
func (m *Manager) loadHandedOver(ctx context.Context, rec *store.Sandbox) error {
	if !m.cfg.SharedImages || State(rec.State) != StatePaused {
		return nil
	}
	return m.loadPaused(ctx, rec)
}

// HandOffPaused gives this node's idle paused sandboxes to other nodes,
// one node per sandbox as pick chooses (placement, wanting the sandbox's
// pause image and layer), and returns how many went. A drained node calls it at its heartbeats: drain moves paused work
// off. Sandboxes with volumes stay (a volume lives on its node's disk).
// Without shared images it does nothing.
func (m *Manager) HandOffPaused(ctx context.Context, pick PickNode) (int, error) {
	if !m.cfg.SharedImages {
		return 0, nil
	}
	wants := map[string][]string{}
	m.mu.Lock()
	for id, e := range m.boxes {
		if movable(e) {
			wants[id] = restoreKeys(images.Pause(id), e.rec.Content)
		}
	}
	m.mu.Unlock()
	n := 0
	for id, want := range wants {
		node, err := pick(ctx, want)
		if err != nil {
			return n, err
		}
		if node == m.cfg.ClientID {
			return n, fmt.Errorf("placement chose this node, which is draining: %w", errdefs.ErrUnavailable)
		}
		moved, err := m.handOff(ctx, id, node, 0)
		if err != nil {
			return n, err
		}
		if moved {
			n++
		}
	}
	return n, nil
}

// handOff moves paused sandbox id to node, under the lock so no claim
// (a resume asked of this node) starts meanwhile. holds is how many
// requests the caller itself holds the sandbox for (Hold); one held by
// any other request stays (a drain's goes at a later heartbeat).
func (m *Manager) handOff(ctx context.Context, id, node string, holds int) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.boxes[id]
	if !ok || !movable(e) || m.held[id] > holds {
		return false, nil
	}
	if _, err := m.st.TransferSandbox(context.WithoutCancel(ctx), id, m.cfg.ClientID, node, string(StatePaused)); err != nil {
		return false, fmt.Errorf("hand paused sandbox %s to node %s: %w", id, node, err)
	}
	delete(m.boxes, id)
	if mv, ok := m.content.(holderMover); ok {
		mv.DisownHolder(sandboxHolder(id))
	}
	m.log.Info("handed a paused sandbox to another node", "sandbox", id, "node", node)
	return true, nil
}

// movable reports whether entry e may move to another node: paused, with
// no operation on it and no volume (a volume lives on its node's disk).
// Callers hold m.mu.
func movable(e *entry) bool {
	return e.state == StatePaused && e.done == nil && len(e.rec.Volumes) == 0
}

// MoveIfFull hands paused sandbox id to the node pick chooses (wanting
// its pause image and layer) when this node is full (a resume would pass
// Config.MaxSandboxes, or leave less than MinFreeMemoryMiB of the host's
// memory free) and returns that
// node, or "" when the sandbox stays: the node has room, the sandbox is
// not paused here, has volumes (on this node's disk), images are not
// shared, or pick chose this node (every node is as full). The caller
// holds the sandbox (Hold) for the resume it is about to forward.
func (m *Manager) MoveIfFull(ctx context.Context, id string, pick PickNode) (string, error) {
	if !m.cfg.SharedImages || m.nodes.Load() == nil {
		return "", nil
	}
	m.mu.Lock()
	e, ok := m.boxes[id]
	stays := !ok || !movable(e)
	var memMB int
	var want []string
	if !stays {
		memMB, want = e.rec.MemoryMB, restoreKeys(images.Pause(id), e.rec.Content)
	}
	roomy := m.admitLocked(1) == nil
	m.mu.Unlock()
	if stays || (roomy && m.memoryFor(memMB)) {
		return "", nil
	}
	node, err := pick(ctx, want)
	if err != nil || node == m.cfg.ClientID {
		// Nowhere better: the resume here meets the quota and says so.
		return "", nil
	}
	moved, err := m.handOff(ctx, id, node, 1)
	if err != nil || !moved {
		return "", err
	}
	m.log.Info("this node is full; its paused sandbox resumes on another", "sandbox", id, "node", node)
	return node, nil
}

// MinFreeMemoryMiB is the host memory a resume must leave free on this
// node before it would rather run on another (Config.FreeMemoryMiB).
const MinFreeMemoryMiB = 512

// memoryFor reports whether this host has room for a sandbox of memMB
// MiB and MinFreeMemoryMiB more; unknown free memory is room.
func (m *Manager) memoryFor(memMB int) bool {
	if m.cfg.FreeMemoryMiB == nil {
		return true
	}
	free := m.cfg.FreeMemoryMiB()
	return free <= 0 || free >= int64(memMB)+MinFreeMemoryMiB
}

// Hold keeps sandbox id on this node until release is called: a request
// about to be answered here (OwnerURL said so) must not find the sandbox
// handed to another node between that answer and its handler. Hold before
// asking OwnerURL; a hold of a sandbox this node lacks keeps nothing.
// Without shared images no sandbox moves, and Hold keeps no count.
func (m *Manager) Hold(id string) (release func()) {
	if !m.cfg.SharedImages {
		return func() {}
	}
	m.mu.Lock()
	m.held[id]++
	m.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			m.mu.Lock()
			defer m.mu.Unlock()
			if m.held[id]--; m.held[id] <= 0 {
				delete(m.held, id)
			}
		})
	}
}

// forgetMovedLocked drops entry id after a write of its record was
// refused because another node took the sandbox over: it is that node's
// now, and requests for it go there.
func (m *Manager) forgetMovedLocked(id string) {
	delete(m.boxes, id)
	if mv, ok := m.content.(holderMover); ok {
		mv.DisownHolder(sandboxHolder(id))
	}
	m.log.Warn("sandbox taken over by another node; forgotten here", "sandbox", id)
}

// orphanImageGrace is how old an image no record names must be before a
// start-up sweep of a shared object store removes it: another node may
// have committed it just now and not yet written the record.
const orphanImageGrace = 10 * time.Minute

// young reports whether image ref is shared and younger than
// orphanImageGrace.
func (m *Manager) young(ctx context.Context, ref images.Ref) bool {
	mt, ok := m.img.(interface {
		ModTime(context.Context, images.Ref) (time.Time, error)
	})
	if !m.cfg.SharedImages || !ok {
		return false
	}
	at, err := mt.ModTime(ctx, ref)
	return err != nil || m.now().Sub(at) < orphanImageGrace
}
