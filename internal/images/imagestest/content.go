package imagestest

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/images"
)

// RunContent runs the suite of images.ContentStore; newStore returns an
// empty store for each case, not yet collected (see ContentStore).
func RunContent(t *testing.T, newStore func(t *testing.T) images.ContentStore) {
	for _, c := range contentCases {
		t.Run(c.name, func(t *testing.T) { c.fn(t, newStore(t)) })
	}
}

var contentCases = []struct {
	name string
	fn   func(t *testing.T, s images.ContentStore)
}{
	{"CommitThenOpen", testContentCommit},
	{"FirstCommitWins", testContentFirstCommitWins},
	{"AbortLeavesNothing", testContentAbort},
	{"HoldChecksTheEntry", testContentHoldChecks},
	{"LastReleaseRemoves", testContentLastRelease},
	{"NothingGoesBeforeTheFirstCollect", testContentCollectArms},
	{"SetReplacesWhatAHolderHolds", testContentSet},
	{"ImportKeepsTheFiles", testContentImport},
	{"CommitTakesACallersDirectory", testContentCommitOwnDir},
	{"BadRefsAndHoldersRefused", testContentBadRefs},
}

var (
	ctx    = context.Background()
	holder = images.Holder{Kind: images.HolderTemplate, ID: "t1"}
)

// contentKey is a valid key made of one repeated hex digit.
func contentKey(c byte) string { return strings.Repeat(string(c), 64) }

// put creates ref with one file f holding body and commits it held by h.
func put(t *testing.T, s images.ContentStore, ref images.ContentRef, body string, h images.Holder) {
	t.Helper()
	dir, err := s.Create(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(ctx, ref, dir, h); err != nil {
		t.Fatal(err)
	}
}

// body reads what put wrote into committed ref ("" when it cannot).
func body(s images.ContentStore, ref images.ContentRef) string {
	dir, err := s.Open(ctx, ref)
	if err != nil {
		return ""
	}
	b, _ := os.ReadFile(filepath.Join(dir, "f"))
	return string(b)
}

func has(s images.ContentStore, ref images.ContentRef) bool {
	_, err := s.Open(ctx, ref)
	return err == nil
}

// collect arms the store (the start-up sweep of an empty store).
func collect(t *testing.T, s images.ContentStore) []images.ContentRef {
	t.Helper()
	removed, err := s.Collect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return removed
}

func testContentCommit(t *testing.T, s images.ContentStore) {
	ref := images.Layer(contentKey('a'))
	if _, err := s.Open(ctx, ref); !errdefs.IsNotFound(err) {
		t.Fatalf("open before commit: %v, want not found", err)
	}
	dir, err := s.Create(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "f"), []byte("layer"), 0o644)
	if has(s, ref) {
		t.Fatal("an entry being written opens")
	}
	if l, _ := s.List(ctx, images.KindLayer); len(l) != 0 {
		t.Fatalf("an entry being written is listed: %v", l)
	}
	if err := s.Commit(ctx, ref, dir, holder); err != nil {
		t.Fatal(err)
	}
	if got := body(s, ref); got != "layer" {
		t.Fatalf("committed entry holds %q", got)
	}
	if l, _ := s.List(ctx, images.KindLayer); !slices.Equal(l, []images.ContentRef{ref}) {
		t.Errorf("list = %v", l)
	}
	if refs, _ := s.References(ctx); !slices.Equal(refs, []images.Reference{{Holder: holder, Ref: ref}}) {
		t.Errorf("after a commit the references are %v, want the committer's", refs)
	}
}

func testContentFirstCommitWins(t *testing.T, s images.ContentStore) {
	ref := images.TemplateImage(contentKey('b'))
	second, err := s.Create(ctx, ref) // created before the first commits
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(second, "f"), []byte("second"), 0o644)
	put(t, s, ref, "first", holder)
	other := images.Holder{Kind: images.HolderBuild, ID: "b2"}
	if err := s.Commit(ctx, ref, second, other); err != nil {
		t.Fatalf("a second writer of one ref: %v", err)
	}
	if body(s, ref) != "first" {
		t.Errorf("entry holds %q, want the first commit's", body(s, ref))
	}
	collect(t, s)
	if err := s.Release(ctx, holder); err != nil {
		t.Fatal(err)
	}
	if !has(s, ref) {
		t.Error("the second committer does not hold the entry")
	}
}

func testContentAbort(t *testing.T, s images.ContentStore) {
	ref := images.Layer(contentKey('c'))
	dir, err := s.Create(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Abort(ctx, dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); err == nil || has(s, ref) {
		t.Errorf("after Abort: dir left %v, entry %v", err == nil, has(s, ref))
	}
	put(t, s, ref, "x", holder)
	p, _ := s.Open(ctx, ref)
	if err := s.Abort(ctx, p); err == nil || !has(s, ref) {
		t.Errorf("Abort of a committed entry: %v (still there: %v)", err, has(s, ref))
	}
}

func testContentHoldChecks(t *testing.T, s images.ContentStore) {
	there, missing := images.Layer(contentKey('a')), images.Layer(contentKey('d'))
	put(t, s, there, "x", holder)
	sb := images.Holder{Kind: images.HolderSandbox, ID: "s1"}
	if err := s.Hold(ctx, sb, there, missing); !errdefs.IsNotFound(err) {
		t.Fatalf("hold of a missing entry: %v, want not found", err)
	}
	collect(t, s)
	if err := s.Release(ctx, holder); err != nil {
		t.Fatal(err)
	}
	if has(s, there) {
		t.Error("a failed Hold kept a reference to the entry that was there")
	}
}

func testContentLastRelease(t *testing.T, s images.ContentStore) {
	shared, own := images.Layer(contentKey('a')), images.TemplateImage(contentKey('b'))
	put(t, s, shared, "shared", holder)
	put(t, s, own, "own", holder)
	sb := images.Holder{Kind: images.HolderSandbox, ID: "s1"}
	if err := s.Hold(ctx, sb, shared); err != nil {
		t.Fatal(err)
	}
	if removed := collect(t, s); len(removed) != 0 {
		t.Fatalf("collect removed held entries %v", removed)
	}
	// The template goes: its own image with it, the layer a sandbox runs
	// on stays until the sandbox goes too.
	if err := s.Release(ctx, holder); err != nil {
		t.Fatal(err)
	}
	if has(s, own) || !has(s, shared) {
		t.Fatalf("after the template's release: own %v, shared %v", has(s, own), has(s, shared))
	}
	if err := s.Release(ctx, sb); err != nil {
		t.Fatal(err)
	}
	if has(s, shared) {
		t.Fatal("the last holder's release left the entry")
	}
	if l, _ := s.List(ctx, images.KindLayer); len(l) != 0 {
		t.Errorf("a released entry is listed: %v", l)
	}
	if err := s.Hold(ctx, sb, shared); !errdefs.IsNotFound(err) {
		t.Errorf("hold of a removed entry: %v", err)
	}
}

func testContentCollectArms(t *testing.T, s images.ContentStore) {
	kept, unheld := images.Layer(contentKey('a')), images.Layer(contentKey('b'))
	put(t, s, kept, "k", holder)
	put(t, s, unheld, "u", images.Holder{Kind: images.HolderBuild, ID: "b1"})
	// At start owners set their holders one after another: a release
	// before the first Collect removes nothing.
	if err := s.Release(ctx, images.Holder{Kind: images.HolderBuild, ID: "b1"}); err != nil {
		t.Fatal(err)
	}
	if !has(s, unheld) {
		t.Fatal("a release before the first Collect removed an entry")
	}
	if removed := collect(t, s); !slices.Equal(removed, []images.ContentRef{unheld}) || !has(s, kept) {
		t.Fatalf("collect removed %v, want only %v", removed, unheld)
	}
}

func testContentSet(t *testing.T, s images.ContentStore) {
	a, b := images.Layer(contentKey('a')), images.Layer(contentKey('b'))
	put(t, s, a, "a", holder)
	put(t, s, b, "b", images.Holder{Kind: images.HolderBuild, ID: "b1"})
	collect(t, s)
	if err := s.Set(ctx, holder, []images.ContentRef{b, images.Layer(contentKey('e'))}); !errdefs.IsNotFound(err) {
		t.Fatalf("set with a missing entry: %v", err)
	}
	if !has(s, a) {
		t.Fatal("a failed Set released what the holder held")
	}
	if err := s.Set(ctx, holder, []images.ContentRef{b}); err != nil {
		t.Fatal(err)
	}
	if has(s, a) {
		t.Error("the entry a Set dropped stayed with no holder")
	}
	if err := s.Release(ctx, images.Holder{Kind: images.HolderBuild, ID: "b1"}); err != nil {
		t.Fatal(err)
	}
	if !has(s, b) {
		t.Error("the entry a Set holds went with its other holder")
	}
	if err := s.Set(ctx, holder, nil); err != nil || has(s, b) {
		t.Errorf("Set(nil): %v, entry left %v", err, has(s, b))
	}
}

func testContentImport(t *testing.T, s images.ContentStore) {
	src := t.TempDir()
	os.MkdirAll(filepath.Join(src, "sub"), 0o755)
	os.WriteFile(filepath.Join(src, "f"), []byte("imported"), 0o644)
	os.WriteFile(filepath.Join(src, "sub", "g"), []byte("deep"), 0o600)
	ref := images.TemplateImage(contentKey('f'))
	if err := images.Import(ctx, s, ref, src, holder); err != nil {
		t.Fatal(err)
	}
	dir, err := s.Open(ctx, ref)
	if err != nil || body(s, ref) != "imported" {
		t.Fatalf("imported entry: %v %q", err, body(s, ref))
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "sub", "g")); string(b) != "deep" {
		t.Errorf("imported sub/g = %q", b)
	}
	sb := images.Holder{Kind: images.HolderBuiltin, ID: "base"}
	if err := images.Import(ctx, s, ref, t.TempDir(), sb); err != nil || body(s, ref) != "imported" {
		t.Errorf("importing an entry already there: %v, holds %q", err, body(s, ref))
	}
}

func testContentCommitOwnDir(t *testing.T, s images.ContentStore) {
	own := filepath.Join(t.TempDir(), "scratch")
	os.Mkdir(own, 0o755)
	os.WriteFile(filepath.Join(own, "f"), []byte("mine"), 0o644)
	ref := images.Layer(contentKey('9'))
	if err := s.Commit(ctx, ref, own, holder); err != nil {
		t.Fatal(err)
	}
	if body(s, ref) != "mine" {
		t.Errorf("entry committed from the caller's directory holds %q", body(s, ref))
	}
	if _, err := os.Stat(own); err == nil {
		t.Error("the handed-over directory is still there")
	}
}

func testContentBadRefs(t *testing.T, s images.ContentStore) {
	for _, ref := range []images.ContentRef{
		{Kind: images.KindLayer, Key: "../../etc"},
		{Kind: images.KindLayer, Key: "short"},
		{Kind: "other", Key: contentKey('a')},
	} {
		if dir, err := s.Create(ctx, ref); !errdefs.IsInvalidArgument(err) {
			t.Errorf("Create(%v): %q, %v", ref, dir, err)
		}
		if _, err := s.Open(ctx, ref); !errdefs.IsInvalidArgument(err) {
			t.Errorf("Open(%v): %v", ref, err)
		}
	}
	ref := images.Layer(contentKey('a'))
	put(t, s, ref, "x", holder)
	for _, h := range []images.Holder{{Kind: "other", ID: "x"}, {Kind: images.HolderSandbox}} {
		if err := s.Hold(ctx, h, ref); !errdefs.IsInvalidArgument(err) {
			t.Errorf("Hold by %+v: %v", h, err)
		}
	}
	if err := s.Commit(ctx, ref, filepath.Join(t.TempDir(), "none"), holder); err == nil {
		t.Error("Commit of a directory that does not exist succeeded")
	}
}
