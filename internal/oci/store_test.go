package oci

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestUnfinishedDownloadsAtOpen: a store that owns its cache removes every
// unfinished download at open (a SIGKILLed daemon's pull left it); one that
// may share the cache removes only those too old to belong to a live pull.
func TestUnfinishedDownloadsAtOpen(t *testing.T) {
	for _, tc := range []struct {
		name     string
		owned    bool
		age      time.Duration
		wantGone bool
	}{
		{"owned, fresh", true, time.Second, true},
		{"owned, old", true, 2 * staleTemp, true},
		{"shared, fresh", false, time.Second, false},
		{"shared, old", false, 2 * staleTemp, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cache := t.TempDir()
			tmp := filepath.Join(cache, "blobs", "tmp")
			if err := os.MkdirAll(tmp, 0o700); err != nil {
				t.Fatal(err)
			}
			half := filepath.Join(tmp, "blob-123")
			if err := os.WriteFile(half, []byte("half a layer"), 0o600); err != nil {
				t.Fatal(err)
			}
			then := time.Now().Add(-tc.age)
			if err := os.Chtimes(half, then, then); err != nil {
				t.Fatal(err)
			}
			if _, err := newBlobStore(cache, tc.owned); err != nil {
				t.Fatal(err)
			}
			_, err := os.Stat(half)
			if gone := os.IsNotExist(err); gone != tc.wantGone {
				t.Errorf("unfinished download removed = %v, want %v", gone, tc.wantGone)
			}
		})
	}
}
