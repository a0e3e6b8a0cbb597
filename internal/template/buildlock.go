package template

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// buildLocked runs build unless ready holds, both under an exclusive lock
// on dir: two processes starting on one template directory (two test
// daemons, a daemon and `forkbox template build`) would otherwise both
// build in dir/rootfs.building and wreck each other's scratch tree. The
// one that waited finds the other's build done and skips its own.
func buildLocked(ctx context.Context, dir string, ready func() bool, build func() error) error {
	if ready() {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(dir, ".build.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return err
	}
	defer f.Close() // closing drops the lock
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			return err
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(250 * time.Millisecond):
		}
	}
	if ready() {
		return nil
	}
	return build()
}
