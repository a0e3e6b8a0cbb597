package fake

import (
	"context"
	"fmt"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/runtime"
)

var _ runtime.MemoryWatcher = (*Runtime)(nil)

// GrowMemory adds n bytes to running sandbox id's memory use (a negative
// n frees), which its WatchMemory sees; the fake has no memory of its own.
func (r *Runtime) GrowMemory(id string, n int64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	sb, err := r.getLocked(id)
	if err != nil {
		return err
	}
	sb.memory = uint64(int64(sb.memory) + n)
	close(sb.grown)
	sb.grown = make(chan struct{})
	return nil
}

// WatchMemory implements runtime.MemoryWatcher over GrowMemory.
func (r *Runtime) WatchMemory(ctx context.Context, id string, step uint64, grew func()) error {
	r.mu.Lock()
	sb, err := r.getLocked(id)
	r.mu.Unlock()
	if err != nil {
		return err
	}
	base, ok := r.watchedMemory(sb)
	if ok {
		grew()
	}
	for {
		if !ok {
			return fmt.Errorf("sandbox %s is stopped: %w", id, errdefs.ErrConflict)
		}
		r.mu.Lock()
		grown := sb.grown
		r.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil
		case <-sb.exited:
			ok = false
			continue
		case <-grown:
		}
		now, running := r.watchedMemory(sb)
		if !running {
			ok = false
			continue
		}
		if now >= base+step || now+step <= base {
			base = now
			grew()
		}
	}
}

// watchedMemory is sb's memory use and whether it still runs.
func (r *Runtime) watchedMemory(sb *sandbox) (uint64, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return sb.memory, sb.state != runtime.StateStopped
}
