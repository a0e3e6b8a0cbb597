package imagestest

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/forkbox/forkbox/internal/images"
)

// RunContent runs the suite of images.ContentStore; newStore returns an
// empty store for each case.
func RunContent(t *testing.T, newStore func(t *testing.T) images.ContentStore) {
	for _, c := range contentCases {
		t.Run(c.name, func(t *testing.T) { c.fn(t, newStore(t)) })
	}
}

var contentCases = []struct {
	name string
	fn   func(t *testing.T, s images.ContentStore)
}{
	{"CommitThenRead", testContentCommit},
	{"FirstCommitWins", testContentFirstCommitWins},
	{"AbortLeavesNothing", testContentAbort},
	{"CollectKeepsReferenced", testContentCollect},
	{"MadeOnFindsImagesOfALayer", testContentMadeOn},
	{"BadRefsRefused", testContentBadRefs},
}

// contentKey is a valid key made of one repeated hex digit.
func contentKey(c byte) string { return strings.Repeat(string(c), 64) }

// put creates ref with one file f holding body and commits it.
func put(t *testing.T, s images.ContentStore, ref images.ContentRef, body string) {
	t.Helper()
	dir, err := s.Create(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(ref, dir); err != nil {
		t.Fatal(err)
	}
}

// body reads what put wrote into committed ref.
func body(s images.ContentStore, ref images.ContentRef) string {
	b, _ := os.ReadFile(filepath.Join(s.Path(ref), "f"))
	return string(b)
}

func testContentCommit(t *testing.T, s images.ContentStore) {
	ref := images.ContentRef{Kind: images.KindLayer, Key: contentKey('a')}
	dir, err := s.Create(ref)
	if err != nil {
		t.Fatal(err)
	}
	if s.Has(ref) {
		t.Fatal("an entry being written is visible")
	}
	os.WriteFile(filepath.Join(dir, "f"), []byte("layer"), 0o644)
	if err := s.Commit(ref, dir); err != nil {
		t.Fatal(err)
	}
	if !s.Has(ref) || body(s, ref) != "layer" {
		t.Fatalf("committed entry: has %v, body %q", s.Has(ref), body(s, ref))
	}
	if got, ok := s.RefOf(s.Path(ref)); !ok || got != ref {
		t.Errorf("RefOf(Path(ref)) = %v %v, want %v", got, ok, ref)
	}
}

func testContentFirstCommitWins(t *testing.T, s images.ContentStore) {
	ref := images.ContentRef{Kind: images.KindTemplateImage, Key: contentKey('b')}
	second, err := s.Create(ref) // created before the first commits
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(second, "f"), []byte("second"), 0o644)
	put(t, s, ref, "first")
	if err := s.Commit(ref, second); err != nil {
		t.Fatalf("a second writer of one ref: %v", err)
	}
	if body(s, ref) != "first" {
		t.Errorf("entry holds %q, want the first commit's", body(s, ref))
	}
	if _, err := os.Stat(second); err == nil {
		t.Errorf("the second writer's directory %s was left", second)
	}
}

func testContentAbort(t *testing.T, s images.ContentStore) {
	ref := images.ContentRef{Kind: images.KindLayer, Key: contentKey('c')}
	dir, err := s.Create(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Abort(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); err == nil || s.Has(ref) {
		t.Errorf("after Abort: dir left %v, has %v", err == nil, s.Has(ref))
	}
	put(t, s, ref, "x")
	if err := s.Abort(s.Path(ref)); err == nil || !s.Has(ref) {
		t.Errorf("Abort of a committed entry: %v (still has it: %v)", err, s.Has(ref))
	}
}

func testContentCollect(t *testing.T, s images.ContentStore) {
	ctx := context.Background()
	shared := images.ContentRef{Kind: images.KindLayer, Key: contentKey('a')}
	onlyA := images.ContentRef{Kind: images.KindLayer, Key: contentKey('b')}
	img := images.ContentRef{Kind: images.KindTemplateImage, Key: contentKey('c')}
	for _, ref := range []images.ContentRef{shared, onlyA, img} {
		put(t, s, ref, ref.Key)
	}
	refs := []images.Reference{
		{Holder: images.HolderTemplate, ID: "A", Ref: shared}, {Holder: images.HolderTemplate, ID: "A", Ref: onlyA},
		{Holder: images.HolderTemplate, ID: "A", Ref: img}, {Holder: images.HolderTemplate, ID: "B", Ref: shared},
	}
	if n := images.Counts(refs)[shared]; n != 2 {
		t.Errorf("count of the shared layer %d, want 2", n)
	}
	// Template A deleted: its own layer and image go, the shared one stays.
	removed, err := s.Collect(ctx, refs[3:])
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(removed, func(a, b images.ContentRef) int { return strings.Compare(a.String(), b.String()) })
	if !slices.Equal(removed, []images.ContentRef{img, onlyA}) || !s.Has(shared) || s.Has(onlyA) || s.Has(img) {
		t.Fatalf("collect removed %v; shared kept %v", removed, s.Has(shared))
	}
	// A sandbox still on the shared layer holds it after B goes too.
	if removed, _ := s.Collect(ctx, []images.Reference{{Holder: images.HolderSandbox, ID: "s1", Ref: shared}}); len(removed) != 0 {
		t.Fatalf("collect removed %v while a sandbox uses it", removed)
	}
	if removed, _ := s.Collect(ctx, nil); len(removed) != 1 || s.Has(shared) {
		t.Fatalf("collect of the unreferenced shared layer: %v", removed)
	}
}

func testContentMadeOn(t *testing.T, s images.ContentStore) {
	layer := images.ContentRef{Kind: images.KindLayer, Key: contentKey('d')}
	img := images.ContentRef{Kind: images.KindTemplateImage, Key: contentKey('e')}
	plain := images.ContentRef{Kind: images.KindTemplateImage, Key: contentKey('f')}
	put(t, s, layer, "rootfs")
	dir, err := s.Create(img)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CommitOn(img, dir, layer); err != nil {
		t.Fatal(err)
	}
	put(t, s, plain, "image")
	got := s.MadeOn(images.KindTemplateImage)
	if len(got) != 1 || !slices.Equal(got[layer], []images.ContentRef{img}) {
		t.Errorf("MadeOn = %v, want %v made on %v only", got, img, layer)
	}
	if _, err := s.Collect(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if got := s.MadeOn(images.KindTemplateImage); len(got) != 0 {
		t.Errorf("MadeOn after everything was collected: %v", got)
	}
}

func testContentBadRefs(t *testing.T, s images.ContentStore) {
	for _, ref := range []images.ContentRef{
		{Kind: images.KindLayer, Key: "../../etc"},
		{Kind: images.KindLayer, Key: "short"},
		{Kind: "other", Key: contentKey('a')},
	} {
		if dir, err := s.Create(ref); err == nil {
			t.Errorf("Create(%v) succeeded: %s", ref, dir)
		}
	}
	if _, ok := s.RefOf("/etc/passwd"); ok {
		t.Error("RefOf of a path outside the store names an entry")
	}
}
