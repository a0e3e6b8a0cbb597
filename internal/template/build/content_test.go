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
// new) and an image, then publishes it and ends the build as the pipeline
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
		if !j.useLayer(ctx, k) {
			dir := filepath.Join(t.TempDir(), "scratch")
			os.Mkdir(dir, 0o755)
			os.WriteFile(filepath.Join(dir, "f"), []byte(k), 0o644)
			if err := j.commitLayer(ctx, dir, k, time.Time{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if !j.useImage(ctx, image) {
		dir, _ := s.content.Create(ctx, imageRef(image))
		os.WriteFile(filepath.Join(dir, "checkpoint.img"), nil, 0o644)
		if err := s.content.Commit(ctx, imageRef(image), dir, j.holder()); err != nil || !j.useImage(ctx, image) {
			t.Fatalf("commit image: %v", err)
		}
	}
	content := []images.ContentRef{layerRef(j.layer), imageRef(image)}
	if err := s.publish(ctx, j, &Meta{User: "user", Layer: j.layer}, &store.Template{ID: rec.ID, Content: content}); err != nil {
		t.Fatal(err)
	}
	s.finish(ctx, j, nil)
	if err := s.content.Release(ctx, j.holder()); err != nil {
		t.Fatal(err)
	}
	return rec.ID
}

func k(c string) string { return strings.Repeat(c, 64) }

func has(s *Service, ref images.ContentRef) bool {
	_, err := s.content.Open(context.Background(), ref)
	return err == nil
}

// TestDeletedTemplateContentReclaimed: deleting a template frees its own
// layers and image at once, keeps a layer another template shares, and
// keeps what a sandbox still holds until that sandbox lets go.
func TestDeletedTemplateContentReclaimed(t *testing.T) {
	ctx := context.Background()
	s, _ := newTestService(t)
	contentBuild(t, s, "one", []string{k("a"), k("b")}, k("1"))
	contentBuild(t, s, "two", []string{k("a"), k("c")}, k("2"))
	if err := s.Delete(ctx, "one"); err != nil {
		t.Fatal(err)
	}
	if has(s, layerRef(k("b"))) || has(s, imageRef(k("1"))) {
		t.Error("template one's own layer or image survived its deletion")
	}
	if !has(s, layerRef(k("a"))) {
		t.Error("the layer template two shares was removed with template one")
	}

	// A sandbox of template two holds what it runs on through two's
	// deletion, and frees it when it goes.
	sb := images.Holder{Kind: images.HolderSandbox, ID: "sbx1"}
	if err := s.content.Hold(ctx, sb, layerRef(k("c")), imageRef(k("2"))); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "two"); err != nil {
		t.Fatal(err)
	}
	if !has(s, layerRef(k("c"))) || !has(s, imageRef(k("2"))) {
		t.Fatal("the layer or image a running sandbox uses went with its template")
	}
	if has(s, layerRef(k("a"))) {
		t.Error("the shared layer outlived both templates")
	}
	if err := s.content.Release(ctx, sb); err != nil {
		t.Fatal(err)
	}
	if has(s, layerRef(k("c"))) || has(s, imageRef(k("2"))) {
		t.Fatal("the last sandbox's release left the deleted template's content")
	}
}

// TestNewerBuildFreesTheOlder: once a newer build is ready, the older
// build's own layer and image go (a layer both share stays).
func TestNewerBuildFreesTheOlder(t *testing.T) {
	s, _ := newTestService(t)
	contentBuild(t, s, "app", []string{k("a"), k("b")}, k("1"))
	contentBuild(t, s, "app", []string{k("a"), k("c")}, k("2"))
	if has(s, layerRef(k("b"))) || has(s, imageRef(k("1"))) {
		t.Error("the older build's own content stayed")
	}
	if !has(s, layerRef(k("a"))) || !has(s, layerRef(k("c"))) || !has(s, imageRef(k("2"))) {
		t.Error("the ready build's content went")
	}
}

// TestTemplatesHoldTheirContentAfterRestart: a restart (a new content
// store on the same directory, a new service) removes half-written
// layers, and the first Collect what no template holds; a ready
// template's content stays.
func TestTemplatesHoldTheirContentAfterRestart(t *testing.T) {
	ctx := context.Background()
	s, _ := newTestService(t)
	contentBuild(t, s, "kept", []string{k("a")}, k("1"))
	half, _ := s.content.Create(ctx, layerRef(k("d")))
	orphan, _ := s.content.Create(ctx, layerRef(k("e")))
	s.content.Commit(ctx, layerRef(k("e")), orphan, images.Holder{Kind: images.HolderBuild, ID: "gone"})
	cfg := s.cfg
	c2, err := images.OpenContent(s.content.(*images.Content).Root())
	if err != nil {
		t.Fatal(err)
	}
	cfg.Content = c2
	s2, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c2.Collect(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(half); err == nil || has(s2, layerRef(k("e"))) {
		t.Errorf("after restart: half-written kept %v, orphan kept %v", err == nil, has(s2, layerRef(k("e"))))
	}
	if !has(s2, layerRef(k("a"))) || !has(s2, imageRef(k("1"))) {
		t.Error("a ready template's content was collected at start")
	}
}

// TestRecordsOfTheOldLayoutMigrate: a record written before records named
// content by ref gets its refs from the paths it kept.
func TestRecordsOfTheOldLayoutMigrate(t *testing.T) {
	r := &Record{
		Meta: &Meta{RootFS: "/data/builds/layers/" + k("a")},
		Builds: []*Build{{Published: &store.Template{
			RootFS: "/data/builds/layers/" + k("a"), ImageDir: "/data/builds/images/" + k("1"),
		}}},
	}
	migrateContent(r)
	if r.Meta.Layer != k("a") || r.Meta.RootFS != "" {
		t.Errorf("meta after migration: %+v", r.Meta)
	}
	p := r.Builds[0].Published
	if len(p.Content) != 2 || p.Content[0] != layerRef(k("a")) || p.Content[1] != imageRef(k("1")) || p.RootFS != "" || p.ImageDir != "" {
		t.Errorf("published template after migration: %+v", p)
	}
}
