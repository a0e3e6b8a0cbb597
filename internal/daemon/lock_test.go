package daemon

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/forkbox/forkbox/internal/errdefs"
)

// TestLockDataDir takes the lock, fails a second taker with the holder's
// pid (flock locks belong to open files, so one process conflicts with
// itself), and lets a taker in once it is released.
func TestLockDataDir(t *testing.T) {
	dir := t.TempDir()
	l, err := lockDataDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	_, err = lockDataDir(dir)
	want := fmt.Sprintf("data dir %s is in use by pid %d", dir, os.Getpid())
	if err == nil || !strings.Contains(err.Error(), want) || !errdefs.IsConflict(err) {
		t.Fatalf("second lock: %v, want a conflict %q", err, want)
	}
	l.release()
	l2, err := lockDataDir(dir)
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	l2.release()
}
