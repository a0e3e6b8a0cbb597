package daemon

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/forkbox/forkbox/internal/errdefs"
)

// LockFile is the file in the data dir a serving daemon holds an exclusive
// flock on: one data dir has one daemon, since each would remove the
// other's standby containers, pool sandboxes and networks as leftovers.
const LockFile = "lock"

// dataDirLock is a held flock on <data-dir>/lock. The kernel drops it when
// the daemon exits however it exits, so a kill -9 leaves no stale lock.
type dataDirLock struct{ f *os.File }

// lockDataDir takes the data dir's lock without waiting and writes this
// process's pid into the file for the next daemon's error message. The
// descriptor is close-on-exec (os.OpenFile's default): sandboxes outlive
// the daemon and must not inherit the lock.
func lockDataDir(dir string) (*dataDirLock, error) {
	path := filepath.Join(dir, LockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("data dir lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		defer f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("data dir %s is in use by pid %s: %w", dir, holderPid(f), errdefs.ErrConflict)
		}
		return nil, fmt.Errorf("data dir lock %s: %w", path, err)
	}
	if err := f.Truncate(0); err != nil {
		f.Close()
		return nil, fmt.Errorf("data dir lock: %w", err)
	}
	if _, err := f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0); err != nil {
		f.Close()
		return nil, fmt.Errorf("data dir lock: %w", err)
	}
	return &dataDirLock{f: f}, nil
}

// holderPid reads the pid the lock's holder wrote ("unknown" if it has
// not written it yet).
func holderPid(f *os.File) string {
	b := make([]byte, 32)
	n, _ := f.ReadAt(b, 0)
	if pid := strings.TrimSpace(string(b[:n])); pid != "" {
		return pid
	}
	return "unknown"
}

// release drops the lock; the file stays (removing it would let two
// daemons lock two different files of the same name).
func (l *dataDirLock) release() { l.f.Close() }
