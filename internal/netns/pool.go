package netns

import (
	"fmt"

	"github.com/forkbox/forkbox/internal/errdefs"
)

// MaxSlots is the number of sandboxes one Manager can hold: slot N owns the
// /30 at offset 4N inside the manager's /16 (host .1, sandbox .2 of it), and
// N runs from 1 to 16382 so that neither the first nor the last /30 of the
// /16 (its network and broadcast addresses) is used. /24s per slot capped a
// daemon at 254 sandboxes, below what a 24 GiB host holds idle.
const MaxSlots = 1<<14 - 2

// pool hands out slot numbers 1..size. It is not safe for concurrent use;
// the Manager guards it with its mutex.
type pool struct {
	size int
	// used maps a slot to the sandbox id holding it.
	used map[int]string
	// next is where the search for a free slot starts, so a released slot
	// is not reused at once (a late packet or conntrack entry of the old
	// sandbox cannot reach the new one).
	next int
}

// newPool returns an empty pool of size slots (1..size).
func newPool(size int) *pool {
	return &pool{size: size, used: make(map[int]string), next: 1}
}

// get returns a free slot for id, or ErrResourceExhausted.
func (p *pool) get(id string) (int, error) {
	for i := 0; i < p.size; i++ {
		slot := (p.next-1+i)%p.size + 1
		if _, taken := p.used[slot]; !taken {
			p.used[slot] = id
			p.next = slot%p.size + 1
			return slot, nil
		}
	}
	return 0, fmt.Errorf("all %d network slots in use: %w", p.size, errdefs.ErrResourceExhausted)
}

// claim marks slot as held by id (used when recovering what exists on the
// host). It fails if the slot is out of range or held by another id.
func (p *pool) claim(slot int, id string) error {
	if slot < 1 || slot > p.size {
		return fmt.Errorf("slot %d out of range 1..%d: %w", slot, p.size, errdefs.ErrInvalidArgument)
	}
	if owner, taken := p.used[slot]; taken && owner != id {
		return fmt.Errorf("slot %d held by %s: %w", slot, owner, errdefs.ErrConflict)
	}
	p.used[slot] = id
	return nil
}

// put frees slot. Freeing a free slot is harmless.
func (p *pool) put(slot int) { delete(p.used, slot) }

// inUse returns the number of held slots.
func (p *pool) inUse() int { return len(p.used) }
