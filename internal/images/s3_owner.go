package images

import (
	"context"
	"time"
)

// This file is what the object-store backend does when a holder moves
// between the daemons sharing its bucket (a paused sandbox taken over by
// another node of a cluster): the markers name the daemon that wrote them,
// and a daemon drops, at its start, the references of its own holders it
// no longer has (releaseStale), so the new owner must put its name on them.

// AdoptHolder makes h's references this daemon's: its markers are
// rewritten with this daemon's name and its entries count as in use here.
func (c *ObjectContent) AdoptHolder(ctx context.Context, h Holder) error {
	if err := h.validate(); err != nil {
		return err
	}
	held, err := c.heldBy(ctx, h)
	if err != nil {
		return err
	}
	for ref := range held {
		if err := c.s.b.putSmall(ctx, holderMarker(h, ref), []byte(c.s.node)); err != nil {
			return err
		}
		c.noteLocal(h, ref, "")
	}
	return nil
}

// DisownHolder forgets, on this daemon only, that h's entries are in use
// here (h moved to another daemon): its markers stay, so they still keep
// the entries, and the local cache may evict them.
func (c *ObjectContent) DisownHolder(h Holder) {
	c.mu.Lock()
	var refs []ContentRef
	for ref, hs := range c.local {
		if hs[h] {
			refs = append(refs, ref)
		}
	}
	delete(c.touched, h)
	c.mu.Unlock()
	for _, ref := range refs {
		c.forgetLocal(h, ref)
	}
}

// ModTime is when image ref was committed (its manifest written), for a
// sweep that must spare an image another daemon committed just now and
// has not recorded yet.
func (o *ObjectImages) ModTime(ctx context.Context, ref Ref) (time.Time, error) {
	if err := ref.Validate(); err != nil {
		return time.Time{}, err
	}
	return o.s.b.modTime(ctx, imageKey(ref))
}
