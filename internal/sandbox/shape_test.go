package sandbox

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/images"
	"github.com/forkbox/forkbox/internal/runtime"
	"github.com/forkbox/forkbox/internal/store"
)

// sizedBase warms the base template with 2 CPUs and a 1024 MiB disk and
// counts the runtime's cold boots from then on.
func sizedBase(t *testing.T, e *env) (*store.Template, *atomic.Int32) {
	t.Helper()
	ctx := context.Background()
	tpl, err := e.st.GetTemplate(ctx, "base")
	if err != nil {
		t.Fatal(err)
	}
	tpl.CPUCount, tpl.DiskSizeMB = 2, 1024
	if err := e.m.WarmTemplate(ctx, tpl, images.TemplateImage(strings.Repeat("b", 16))); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.content.Collect(ctx); err != nil { // the daemon's start-up collection
		t.Fatal(err)
	}
	if err := e.st.PutTemplate(ctx, tpl); err != nil {
		t.Fatal(err)
	}
	var boots atomic.Int32
	e.rt.FailCreate = func(runtime.Spec) error { boots.Add(1); return nil }
	return tpl, &boots
}

// A create of a warmed template with another disk size or CPU count gets
// them — a restore keeps its image's, so they come from an image of that
// shape, booted once beside the template's and restored from then on —
// while its default shape restores the template's own image.
func TestCreateOfAnotherShape(t *testing.T) {
	e := newEnv(t)
	tpl, boots := sizedBase(t, e)
	var wg sync.WaitGroup
	sbs := make([]*Sandbox, 3)
	for i := range sbs {
		wg.Go(func() { sbs[i] = e.create(t, CreateRequest{DiskSizeMB: 2048, CPUCount: 1}) })
	}
	wg.Wait()
	if n := boots.Load(); n != 1 {
		t.Errorf("three concurrent creates of one new shape booted %d times, want once", n)
	}
	base := tpl.Content[0]
	if shaped := shapeRef(base, 1, 2048); !e.hasContent(shaped) {
		t.Fatalf("no image of the shape: %s", shaped)
	}
	for _, sb := range sbs {
		if sb.DiskSizeMB != 2048 || sb.CPUCount != 1 {
			t.Errorf("sandbox %s has %d CPUs and %d MiB, want 1 and 2048", sb.ID, sb.CPUCount, sb.DiskSizeMB)
		}
		if n := e.count(t, sb.ID); n != 1 {
			t.Errorf("sandbox %s answers %d", sb.ID, n)
		}
	}
	e.create(t, CreateRequest{DiskSizeMB: 2048, CPUCount: 1})
	def := e.create(t, CreateRequest{DiskSizeMB: 1024})
	if n := boots.Load(); n != 1 {
		t.Errorf("creates of known shapes booted %d times in all, want the first shape's one", n)
	}
	if def.DiskSizeMB != 1024 || def.CPUCount != 2 {
		t.Errorf("a create of the template's shape: %d CPUs, %d MiB", def.CPUCount, def.DiskSizeMB)
	}
	e.create(t, CreateRequest{DiskSizeMB: 512})
	if n := boots.Load(); n != 2 || !e.hasContent(shapeRef(base, 2, 512)) {
		t.Errorf("a second shape: %d boots in all, image there: %v", n, e.hasContent(shapeRef(base, 2, 512)))
	}
	ents, _ := os.ReadDir(filepath.Join(e.m.cfg.ImageDir, string(images.KindTemplateImage)))
	for _, ent := range ents {
		if strings.HasPrefix(ent.Name(), ".") {
			t.Errorf("scratch %s left", ent.Name())
		}
	}
}

// A snapshot's or a user template's image holds state no boot makes again:
// another disk size, or more CPUs than it has, is refused; fewer CPUs
// restore it (the agent narrows them).
func TestShapeOfImagesThatCannotBeRemade(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	base, _ := sizedBase(t, e)
	src := e.create(t, CreateRequest{})
	snap, err := e.m.Snapshot(ctx, src.ID, SnapshotOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stpl, err := e.st.GetTemplate(ctx, snap.ID)
	if err != nil {
		t.Fatal(err)
	}
	// A built template's image: a captured sandbox, not a warm boot.
	user := &store.Template{ID: "user-tpl", Kind: store.KindTemplate, RootFS: stpl.RootFS, CPUCount: 2, MemoryMB: 256,
		DiskSizeMB: 1024, Content: base.Content}
	if err := e.st.PutTemplate(ctx, user); err != nil {
		t.Fatal(err)
	}
	for _, from := range []string{snap.ID, user.ID} {
		for _, req := range []CreateRequest{{DiskSizeMB: 2048}, {CPUCount: 3}} {
			req.TemplateID = from
			_, err := e.m.Create(ctx, req)
			if !errdefs.IsInvalidArgument(err) || !strings.Contains(err.Error(), "a restore keeps its image's") {
				t.Errorf("create %+v: %v, want ErrInvalidArgument", req, err)
			}
		}
		sb, err := e.m.Create(ctx, CreateRequest{TemplateID: from, CPUCount: 1, DiskSizeMB: 1024})
		if err != nil || sb.CPUCount != 1 {
			t.Errorf("create of %s with fewer CPUs: %+v, %v", from, sb, err)
		}
	}
}

// A template without an image boots every sandbox: each gets its own size.
func TestColdBootTakesTheSize(t *testing.T) {
	e := newEnv(t)
	var disk atomic.Int32
	e.rt.FailCreate = func(s runtime.Spec) error { disk.Store(int32(s.Resources.DiskMB)); return nil }
	sb := e.create(t, CreateRequest{DiskSizeMB: 300})
	if sb.DiskSizeMB != 300 || disk.Load() != 300 {
		t.Errorf("record %d MiB, runtime %d MiB; want 300", sb.DiskSizeMB, disk.Load())
	}
}

// A template keeps at most maxShapeImages images of other shapes: the one
// created from least recently is let go when another is made, and leaves
// the disk once no sandbox restored from it is left.
func TestShapeImagesAreBounded(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	tpl, _ := sizedBase(t, e)
	base := tpl.Content[0]
	for i := range maxShapeImages + 2 {
		sb := e.create(t, CreateRequest{DiskSizeMB: 100 + i})
		if i == 0 {
			continue
		}
		e.create(t, CreateRequest{DiskSizeMB: 100}) // the first stays in use
		if err := e.m.Kill(ctx, sb.ID); err != nil {
			t.Fatal(err)
		}
	}
	refs, _ := e.m.content.List(ctx, images.KindTemplateImage)
	var left []string
	for _, ref := range refs {
		if isShapeOf(ref, base) {
			left = append(left, ref.Key)
		}
	}
	if len(left) != maxShapeImages {
		t.Errorf("%d shaped images left, want %d: %v", len(left), maxShapeImages, left)
	}
	for _, gone := range []int{101, 102} {
		if e.hasContent(shapeRef(base, 2, gone)) {
			t.Errorf("the image of %d MiB, among the least recently used, is still there", gone)
		}
	}
	for _, kept := range []int{100, 100 + maxShapeImages + 1} {
		if !e.hasContent(shapeRef(base, 2, kept)) {
			t.Errorf("the image of %d MiB was removed", kept)
		}
	}
}
