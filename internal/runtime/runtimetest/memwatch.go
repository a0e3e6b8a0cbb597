package runtimetest

import (
	"context"
	"errors"
	"time"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/runtime"
)

// testWatchMemory checks runtime.MemoryWatcher: memory grown by more than
// the step is reported within a second, a watch whose ctx ends returns nil,
// and one whose sandbox goes returns ErrConflict or ErrNotFound.
func testWatchMemory(s *suite) {
	mw, ok := s.rt.(runtime.MemoryWatcher)
	if !ok {
		return // an optional ability; backends that have it are checked
	}
	id := NewID()
	s.create(id)
	grew := make(chan time.Time, 1000)
	watch := func(ctx context.Context) <-chan error {
		done := make(chan error, 1)
		go func() {
			done <- mw.WatchMemory(ctx, id, 16<<20, func() { grew <- time.Now() })
		}()
		return done
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := watch(ctx)
	time.Sleep(300 * time.Millisecond) // let the watch arm
	for len(grew) > 0 {
		<-grew // the sandbox settling: allowed
	}
	start := time.Now()
	s.mustGet(id, "/grow?mib=64")
	select {
	case at := <-grew:
		s.t.Logf("timing: %s 64 MiB grown → watch told after %v (the request itself: %v)", s.rt.Name(), at.Sub(start), time.Since(start))
	case <-time.After(time.Second):
		s.t.Fatalf("64 MiB grown with a 16 MiB step: no call within a second")
	}
	cancel()
	if err := <-done; err != nil {
		s.t.Fatalf("WatchMemory after its ctx ended: %v, want nil", err)
	}
	done = watch(context.Background())
	time.Sleep(100 * time.Millisecond)
	if err := s.rt.Delete(context.Background(), id); err != nil {
		s.t.Fatalf("Delete: %v", err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, errdefs.ErrConflict) && !errors.Is(err, errdefs.ErrNotFound) {
			s.t.Fatalf("WatchMemory of a deleted sandbox: %v, want ErrConflict or ErrNotFound", err)
		}
	case <-time.After(10 * time.Second):
		s.t.Fatalf("WatchMemory did not return 10 s after its sandbox was deleted")
	}
	if err := mw.WatchMemory(context.Background(), NewID(), 16<<20, func() {}); !errors.Is(err, errdefs.ErrNotFound) {
		s.t.Fatalf("WatchMemory of an unknown id: %v, want ErrNotFound", err)
	}
}
