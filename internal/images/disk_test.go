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
