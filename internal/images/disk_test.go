package images_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/forkbox/forkbox/internal/images"
	"github.com/forkbox/forkbox/internal/images/imagestest"
	"github.com/forkbox/forkbox/internal/runtime"
)

func TestDiskConformance(t *testing.T) {
	imagestest.Run(t, func(t *testing.T) images.Store {
		d, err := images.NewDisk(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return d
	})
}

func TestContentConformance(t *testing.T) {
	imagestest.RunContent(t, func(t *testing.T) images.ContentStore {
		c, err := images.OpenContent(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return c
	})
}

// TestDiskRecoversPartialImages: an image a crashed process was writing is
// gone when the store is opened again; committed ones stay.
func TestDiskRecoversPartialImages(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	d, err := images.NewDisk(root)
	if err != nil {
		t.Fatal(err)
	}
	done, half := images.Pause(runtime.NewID()), images.Pause(runtime.NewID())
	for _, ref := range []images.Ref{done, half} {
		dir, err := d.Create(ctx, ref)
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, "checkpoint.img"), []byte("x"), 0o600)
	}
	if err := d.Commit(ctx, done); err != nil {
		t.Fatal(err)
	}
	d, err = images.NewDisk(root)
	if err != nil {
		t.Fatal(err)
	}
	if !images.Exists(ctx, d, done) {
		t.Error("committed image lost on reopen")
	}
	ents, _ := os.ReadDir(filepath.Join(root, string(images.KindPause)))
	if len(ents) != 1 || ents[0].Name() != done.ID {
		t.Errorf("after reopen the pause dir holds %v", ents)
	}
	if err := d.Commit(ctx, half); err == nil {
		t.Error("a half-written image survived the restart")
	}
}

// TestDiskRecoversInterruptedCommit: a crash between Commit's two renames
// (the old image moved aside, the new one not yet in place) leaves the old
// image; after the second rename, the new one.
func TestDiskRecoversInterruptedCommit(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	dir := filepath.Join(root, string(images.KindSnapshot))
	aside, both := runtime.NewID(), runtime.NewID()
	os.MkdirAll(filepath.Join(dir, aside+".old"), 0o700)
	os.WriteFile(filepath.Join(dir, aside+".old", "checkpoint.img"), []byte("old"), 0o600)
	os.MkdirAll(filepath.Join(dir, both+".old"), 0o700)
	os.WriteFile(filepath.Join(dir, both+".old", "checkpoint.img"), []byte("old"), 0o600)
	os.MkdirAll(filepath.Join(dir, both), 0o700)
	os.WriteFile(filepath.Join(dir, both, "checkpoint.img"), []byte("new"), 0o600)
	d, err := images.NewDisk(root)
	if err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]string{aside: "old", both: "new"} {
		p, err := d.Open(ctx, images.Snapshot(id))
		if err != nil {
			t.Fatalf("open %s: %v", id, err)
		}
		if b, _ := os.ReadFile(filepath.Join(p, "checkpoint.img")); string(b) != want {
			t.Errorf("%s holds %q, want %q", id, b, want)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 2 {
		t.Errorf("left %v", ents)
	}
}
