package runtime

import "context"

// MemoryWatcher is the optional ability to learn that a running sandbox's
// memory use grew without polling it. The daemon wakes the sandbox's
// out-of-memory guard with it, so the guard need not look on its own
// while memory is plentiful: every look wakes the whole sandbox.
type MemoryWatcher interface {
	// WatchMemory calls grew once the watch is armed, then each time the
	// host memory sandbox id uses has moved by step bytes or more since the
	// last call, until ctx ends (nil) or the sandbox stops (ErrConflict; an
	// unknown id is ErrNotFound). It may call grew for less, never fails to
	// call it for more; grew runs on the watch's goroutine.
	WatchMemory(ctx context.Context, id string, step uint64, grew func()) error
}
