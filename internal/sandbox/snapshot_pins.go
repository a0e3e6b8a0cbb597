package sandbox

import (
	"context"
	"fmt"
	"sync"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/images"
)

// snapshotPins keeps a snapshot's image on disk while operations read it
// (a create from the snapshot, a clone, a rollback): a restore reads the
// image's files for as long as it runs, and a delete racing it used to
// pull them away mid-read (a 500: "checkpoint.img: no such file"). A
// delete meanwhile removes the record at once — later operations get
// 404 — and the image when the last reader is done.
type snapshotPins struct {
	mu     sync.Mutex
	n      map[string]int  // readers per snapshot id
	doomed map[string]bool // deleted while read: remove at the last unpin
}

// openSnapshot pins snapshot id's image and returns its directory; unpin
// must be called when the read is over (also on error paths). A snapshot
// whose image is gone is ErrNotFound.
func (m *Manager) openSnapshot(ctx context.Context, id string) (dir string, unpin func(), err error) {
	p := &m.pins
	p.mu.Lock()
	if p.n == nil {
		p.n, p.doomed = map[string]int{}, map[string]bool{}
	}
	p.n[id]++
	p.mu.Unlock()
	var once sync.Once
	unpin = func() { once.Do(func() { m.unpinSnapshot(ctx, id) }) }
	dir, err = m.img.Open(ctx, images.Snapshot(id))
	if err != nil {
		unpin()
		return "", func() {}, fmt.Errorf("snapshot %s has lost its image (deleted?): %w", id, errdefs.ErrNotFound)
	}
	return dir, unpin, nil
}

// unpinSnapshot ends one read of id; the last one removes the image of a
// snapshot deleted meanwhile.
func (m *Manager) unpinSnapshot(ctx context.Context, id string) {
	p := &m.pins
	p.mu.Lock()
	p.n[id]--
	last := p.n[id] <= 0
	drop := last && p.doomed[id]
	if last {
		delete(p.n, id)
		delete(p.doomed, id)
	}
	p.mu.Unlock()
	if drop {
		m.dropSnapshotImage(context.WithoutCancel(ctx), id)
	}
}

// deferSnapshotImage reports whether id's image is being read; if so it
// is marked to go with the last read instead of now.
func (m *Manager) deferSnapshotImage(id string) bool {
	p := &m.pins
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.n[id] > 0 {
		p.doomed[id] = true
		return true
	}
	return false
}

// dropSnapshotImage removes a deleted snapshot's image and its holds on
// template content.
func (m *Manager) dropSnapshotImage(ctx context.Context, id string) {
	m.layers.drop(id)
	if err := m.img.Remove(ctx, images.Snapshot(id)); err != nil {
		m.log.Error("remove snapshot image", "snapshot", id, "err", err)
	}
	m.release(ctx, snapshotHolder(id))
}
