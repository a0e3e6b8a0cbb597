package daemontest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/forkbox/forkbox/internal/daemon"
)

// Network indexes name a daemon's firewall table (forkbox<N>), links and
// namespaces (fbx<N>-…) and pick its subnet, so two daemons given one
// index tear down each other's networks. Test packages run in parallel
// processes, and some tests start several daemons: each index a test
// process uses is reserved host-wide with an flock on a file of its own,
// which the kernel drops when the process ends, however it ends.
const (
	firstIndex, lastIndex = 1, 50 // serve accepts 0..50; 0 is a developer's daemon
	indexLockDir          = "/run/forkbox-test-index"
)

// process is this process's own index, taken on first use and held until
// the process exits: its daemons share it (and its firewall table).
var process struct {
	once  sync.Once
	index int
	lock  *os.File // kept referenced: a collected *os.File closes its lock
}

// networkIndex is this process's own index (the pid spreads the first
// guesses); if every index is taken it falls back to the guess.
func networkIndex() int {
	process.once.Do(func() {
		guess := firstIndex + os.Getpid()%(lastIndex-firstIndex+1)
		process.index, process.lock = reserve(guess)
		if process.lock == nil {
			process.index = guess
		}
	})
	return process.index
}

// ReserveIndex reserves another network index for t (a second or third
// node of a cluster test), distinct from every index any test process
// holds, until t ends. It fails t if all are taken.
func ReserveIndex(t testing.TB) int {
	t.Helper()
	networkIndex() // this process's own first, so it is never handed out here
	n, lock := reserve(firstIndex + (os.Getpid()+7)%(lastIndex-firstIndex+1))
	if lock == nil {
		t.Fatalf("daemontest: every network index %d..%d is held by a test process", firstIndex, lastIndex)
	}
	t.Cleanup(func() { lock.Close() })
	return n
}

// reserve locks the first free index from guess on, preferring one that
// holds no leftovers of an aborted run (hasLeftovers); nil if none.
func reserve(guess int) (int, *os.File) {
	if err := os.MkdirAll(indexLockDir, 0o755); err != nil {
		return 0, nil
	}
	span := lastIndex - firstIndex + 1
	for _, clean := range []bool{true, false} {
		for i := range span {
			n := firstIndex + (guess-firstIndex+i)%span
			if clean && hasLeftovers(n) {
				continue
			}
			if f := tryLock(n); f != nil {
				return n, f
			}
		}
	}
	return 0, nil
}

// tryLock takes index n's lock without waiting; nil if another holds it.
func tryLock(n int) *os.File {
	f, err := os.OpenFile(filepath.Join(indexLockDir, fmt.Sprint(n)), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil
	}
	return f
}

// hasLeftovers reports whether index n names a network namespace or a
// sandbox's memory cgroup: an aborted run's, which a test counting what
// its own daemon leaves would take for its own.
func hasLeftovers(n int) bool {
	ents, _ := os.ReadDir("/var/run/netns")
	prefix := daemon.NetNSPrefix(n)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), prefix) {
			return true
		}
	}
	ents, _ = os.ReadDir(filepath.Join("/sys/fs/cgroup/memory", daemon.CgroupParent(n)))
	for _, e := range ents {
		if e.IsDir() {
			return true
		}
	}
	return false
}
