package sandbox

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/forkbox/forkbox/internal/volumes"
)

// TestEnsureVolumesRemovesUnrecorded: a starting daemon removes volume
// storage no record names (a daemon killed inside CreateVolume left it:
// TestChaos, seed 1796532607233168133, 'volume storage of nothing
// listed'), and nothing else.
func TestEnsureVolumesRemovesUnrecorded(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	host, err := volumes.New(dir, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	e.m.cfg.Volumes = host
	stray := filepath.Join(dir, "strayvolume0000000000", "mnt")
	if err := os.MkdirAll(stray, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := e.m.EnsureVolumes(context.Background()); err != nil {
		t.Fatal(err)
	}
	if ids, err := host.IDs(); err != nil || len(ids) != 0 {
		t.Errorf("volume storage left: %v, %v", ids, err)
	}
}
