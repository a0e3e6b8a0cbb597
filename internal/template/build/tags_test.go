package build

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/forkbox/forkbox/internal/errdefs"
	imagestore "github.com/forkbox/forkbox/internal/images"
	"github.com/forkbox/forkbox/internal/oci"
	"github.com/forkbox/forkbox/internal/runtime/fake"
	"github.com/forkbox/forkbox/internal/store"
)

// newTestService is a Service on the fake runtime and an in-memory store:
// for what a build records, not how it runs.
func newTestService(t *testing.T) (*Service, *store.Store) {
	t.Helper()
	dir := t.TempDir()
	st, err := store.OpenPath(context.Background(), ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	images, err := oci.New(oci.Options{CacheDir: filepath.Join(dir, "oci")})
	if err != nil {
		t.Fatal(err)
	}
	up, err := NewUploads(filepath.Join(dir, "uploads"), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	content, err := imagestore.OpenContent(filepath.Join(dir, "images"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{Runtime: fake.New(), Store: st, Images: images, Content: content, Uploads: up, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	// As the daemon does once every owner of references has set them.
	if _, err := content.Collect(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s, st
}

// readyBuild requests a build of name and publishes it as if its pipeline
// had finished with an image called image.
func readyBuild(t *testing.T, s *Service, name string, tags []string, image string) (tplID, buildID string) {
	t.Helper()
	ctx := context.Background()
	rec, buildID, err := s.RequestBuild(ctx, Request{Name: name, Tags: tags})
	if err != nil {
		t.Fatal(err)
	}
	j := &job{s: s, tplID: rec.ID, buildID: buildID}
	if err := s.publish(ctx, j, &Meta{User: "user"}, &store.Template{ID: rec.ID, ImageDir: image, RootFS: "/rootfs"}); err != nil {
		t.Fatal(err)
	}
	s.finish(ctx, j, nil)
	return rec.ID, buildID
}

func imageOf(t *testing.T, st *store.Store, ref string) string {
	t.Helper()
	tpl, err := st.GetTemplate(context.Background(), ref)
	if err != nil {
		t.Fatalf("store template %s: %v", ref, err)
	}
	return tpl.ImageDir
}

func TestTagsNameBuilds(t *testing.T) {
	ctx := context.Background()
	s, st := newTestService(t)
	id, b1 := readyBuild(t, s, "app:v1", nil, "/img1")
	_, b2 := readyBuild(t, s, "app:v2", []string{"latest"}, "/img2")

	// Each tag starts the build it names; the bare name the latest.
	for ref, want := range map[string]string{"app": "/img2", id: "/img2", "app:v1": "/img1", "app:v2": "/img2", "app:latest": "/img2"} {
		if got := imageOf(t, st, ref); got != want {
			t.Errorf("%s starts %s, want %s", ref, got, want)
		}
	}
	tags, err := s.Tags(ctx, "app")
	if err != nil || len(tags) != 3 || tags[0].Tag != "v1" || tags[0].BuildID != b1 || tags[1].BuildID != b2 {
		t.Fatalf("Tags = %+v, %v", tags, err)
	}

	// Assigning moves a tag to the target's build.
	got, err := s.AssignTags(ctx, "app:v1", []string{"stable", "latest"})
	if err != nil || got != b1 {
		t.Fatalf("AssignTags = %q, %v; want build %s", got, err, b1)
	}
	if img := imageOf(t, st, "app:latest"); img != "/img1" {
		t.Errorf("app:latest after assign starts %s, want /img1", img)
	}
	if img := imageOf(t, st, "app:stable"); img != "/img1" {
		t.Errorf("app:stable starts %s, want /img1", img)
	}

	// Removing a tag frees its name; an unknown tag changes nothing.
	if err := s.RemoveTags(ctx, "app", []string{"v1", "nope"}); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("RemoveTags of an unknown tag = %v, want not found", err)
	}
	if err := s.RemoveTags(ctx, "app", []string{"v1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.GetTemplate(ctx, "app:v1"); !errdefs.IsNotFound(err) {
		t.Errorf("app:v1 after removal: %v, want not found", err)
	}
	if img := imageOf(t, st, "app:stable"); img != "/img1" {
		t.Errorf("app:stable after removing v1 starts %s", img)
	}

	// Builtins lists none of the template's store entries; Delete removes them all.
	if bs, _ := s.Builtins(ctx); len(bs) != 0 {
		t.Errorf("Builtins = %+v, want none", bs)
	}
	if err := s.Delete(ctx, "app"); err != nil {
		t.Fatal(err)
	}
	if all, _ := st.ListTemplates(ctx, store.KindTemplate); len(all) != 0 {
		t.Errorf("store templates after delete: %d", len(all))
	}
}

func TestAssignTagsErrors(t *testing.T) {
	ctx := context.Background()
	s, _ := newTestService(t)
	if _, _, err := s.RequestBuild(ctx, Request{Name: "new"}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		target string
		tags   []string
		want   error
	}{
		{"new", []string{"x"}, errdefs.ErrNotFound}, // no ready build
		{"missing:v1", []string{"x"}, errdefs.ErrNotFound},
		{"new", nil, errdefs.ErrInvalidArgument},
		{"new", []string{"a:b"}, errdefs.ErrInvalidArgument},
	} {
		if _, err := s.AssignTags(ctx, tc.target, tc.tags); !errors.Is(err, tc.want) {
			t.Errorf("AssignTags(%q, %q) = %v, want %v", tc.target, tc.tags, err, tc.want)
		}
	}
}
