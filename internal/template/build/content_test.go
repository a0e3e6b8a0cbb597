package build

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/forkbox/forkbox/internal/images"
	"github.com/forkbox/forkbox/internal/store"
)

// contentBuild builds template name "by hand": its layers (committed if
// new) and an image made on the last, then publishes it, as the pipeline
// does.
func contentBuild(t *testing.T, s *Service, name string, layers []string, image string) string {
	t.Helper()
	ctx := context.Background()
	rec, buildID, err := s.RequestBuild(ctx, Request{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	j := &job{s: s, tplID: rec.ID, buildID: buildID}
	for _, k := range layers {
		if !j.useLayer(k) {
			dir, _ := s.content.Create(layerRef(k))
			os.WriteFile(filepath.Join(dir, "f"), []byte(k), 0o644)
			if err := j.commitLayer(dir, k, time.Time{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	dir, _ := s.content.Create(imageRef(image))
	os.WriteFile(filepath.Join(dir, "checkpoint.img"), nil, 0o644)
	if err := s.content.CommitOn(imageRef(image), dir, layerRef(j.key)); err != nil || !j.useImage(image) {
		t.Fatalf("commit image: %v", err)
	}
	if err := s.publish(ctx, j, &Meta{User: "user", RootFS: j.rootfs}, &store.Template{ID: rec.ID, RootFS: j.rootfs, ImageDir: s.content.Path(imageRef(image))}); err != nil {
		t.Fatal(err)
	}
	s.finish(ctx, j, nil)
	return rec.ID
}

func k(c string) string { return strings.Repeat(c, 64) }

// TestDeletedTemplateContentReclaimed: deleting a template frees its own
// layers and image, keeps a layer another template shares, and keeps
// what a sandbox still runs on until that sandbox is gone.
func TestDeletedTemplateContentReclaimed(t *testing.T) {
	ctx := context.Background()
	s, st := newTestService(t)
	contentBuild(t, s, "one", []string{k("a"), k("b")}, k("1"))
	contentBuild(t, s, "two", []string{k("a"), k("c")}, k("2"))
	has := func(ref images.ContentRef) bool { return s.content.Has(ref) }
	// A killed sandbox's record stays for the API; it holds nothing.
	if err := st.PutSandbox(ctx, &store.Sandbox{ID: "dead1", TemplateID: "one", State: "killed", RootFS: s.layerDir(k("b"))}); err != nil {
		t.Fatal(err)
	}

	if err := s.Delete(ctx, "one"); err != nil {
		t.Fatal(err)
	}
	if has(layerRef(k("b"))) || has(imageRef(k("1"))) {
		t.Error("template one's own layer or image survived its deletion")
	}
	if !has(layerRef(k("a"))) {
		t.Error("the layer template two shares was removed with template one")
	}

	// A sandbox of template two runs on through two's deletion.
	sb := &store.Sandbox{ID: "sbx1", TemplateID: "two", State: "running", RootFS: s.layerDir(k("c"))}
	if err := st.PutSandbox(ctx, sb); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "two"); err != nil {
		t.Fatal(err)
	}
	if !has(layerRef(k("c"))) || !has(imageRef(k("2"))) {
		t.Fatal("the layer or image a running sandbox uses went with its template")
	}
	if has(layerRef(k("a"))) {
		t.Error("the shared layer outlived both templates")
	}
	st.DeleteSandbox(ctx, "sbx1")
	removed, err := s.Collect(ctx)
	if err != nil || len(removed) != 2 || has(layerRef(k("c"))) || has(imageRef(k("2"))) {
		t.Fatalf("after the last sandbox: removed %v, %v", removed, err)
	}
}

// TestCollectAtStart: a restart removes half-written layers and images,
// and the content no template, sandbox or snapshot references; a ready
// template's stays.
func TestCollectAtStart(t *testing.T) {
	s, _ := newTestService(t)
	contentBuild(t, s, "kept", []string{k("a")}, k("1"))
	half, _ := s.content.Create(layerRef(k("d")))
	orphan, _ := s.content.Create(layerRef(k("e")))
	s.content.Commit(layerRef(k("e")), orphan)
	s2, err := New(s.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(half); err == nil || s2.content.Has(layerRef(k("e"))) {
		t.Errorf("after restart: half-written kept %v, orphan kept %v", err == nil, s2.content.Has(layerRef(k("e"))))
	}
	if !s2.content.Has(layerRef(k("a"))) || !s2.content.Has(imageRef(k("1"))) {
		t.Error("a ready template's content was collected at start")
	}
}
