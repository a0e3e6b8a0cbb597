package template

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestBuildLockedBuildsOnce: of several starts racing on one template
// directory exactly one builds; the others wait and find it done.
func TestBuildLockedBuildsOnce(t *testing.T) {
	dir := t.TempDir()
	done := filepath.Join(dir, ".complete")
	ready := func() bool { _, err := os.Stat(done); return err == nil }
	var builds, inside atomic.Int32
	build := func() error {
		if inside.Add(1) != 1 {
			t.Error("two builds at once in one directory")
		}
		defer inside.Add(-1)
		builds.Add(1)
		time.Sleep(300 * time.Millisecond)
		return os.WriteFile(done, nil, 0o644)
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			if err := buildLocked(context.Background(), dir, ready, build); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if n := builds.Load(); n != 1 {
		t.Errorf("%d builds, want 1", n)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	os.Remove(done)
	// A cancelled start gives up instead of waiting forever on a held lock.
	lock, err := os.OpenFile(filepath.Join(dir, ".build.lock"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := flockEx(lock); err != nil {
		t.Fatal(err)
	}
	if err := buildLocked(ctx, dir, ready, build); err == nil {
		t.Error("buildLocked with a cancelled context and a held lock succeeded")
	}
}

func flockEx(f *os.File) error { return unix.Flock(int(f.Fd()), unix.LOCK_EX) }
