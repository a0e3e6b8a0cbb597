// Package imagestest is the conformance suite of images.Store: every
// backend (the disk, a future object store) runs it, so the Manager can
// rely on one behaviour.
package imagestest

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/images"
	"github.com/forkbox/forkbox/internal/runtime"
)

// Run runs the suite; newStore returns an empty store for each case.
func Run(t *testing.T, newStore func(t *testing.T) images.Store) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.fn(t, newStore(t)) })
	}
}

var cases = []struct {
	name string
	fn   func(t *testing.T, s images.Store)
}{
	{"CreateCommitOpen", testCreateCommitOpen},
	{"UncommittedIsInvisible", testUncommitted},
	{"EmptyCommitRefused", testEmptyCommit},
	{"CommitReplaces", testCommitReplaces},
	{"LinkSharesContent", testLink},
	{"RemoveAndList", testRemoveAndList},
	{"SweepKeepsReferenced", testSweep},
	{"BadRefsRefused", testBadRefs},
}

// write creates ref with one file holding content and commits it.
func write(t *testing.T, s images.Store, ref images.Ref, content string) {
	t.Helper()
	ctx := context.Background()
	dir, err := s.Create(ctx, ref)
	if err != nil {
		t.Fatalf("create %s: %v", ref, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "checkpoint.img"), []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(ctx, ref); err != nil {
		t.Fatalf("commit %s: %v", ref, err)
	}
}

// content reads what ref's image holds.
func content(t *testing.T, s images.Store, ref images.Ref) string {
	t.Helper()
	dir, err := s.Open(context.Background(), ref)
	if err != nil {
		t.Fatalf("open %s: %v", ref, err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "checkpoint.img"))
	if err != nil {
		t.Fatalf("read %s: %v", ref, err)
	}
	return string(b)
}

func testCreateCommitOpen(t *testing.T, s images.Store) {
	ref := images.Pause(runtime.NewID())
	if _, err := s.Open(context.Background(), ref); !errdefs.IsNotFound(err) {
		t.Fatalf("open before create: %v, want not found", err)
	}
	write(t, s, ref, "one")
	if got := content(t, s, ref); got != "one" {
		t.Fatalf("content = %q", got)
	}
	if !images.Exists(context.Background(), s, ref) {
		t.Error("Exists = false for a committed image")
	}
}

func testUncommitted(t *testing.T, s images.Store) {
	ctx := context.Background()
	ref := images.Snapshot(runtime.NewID())
	dir, err := s.Create(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	if ents, err := os.ReadDir(dir); err != nil || len(ents) != 0 {
		t.Fatalf("Create's directory is not empty: %v %v", ents, err)
	}
	os.WriteFile(filepath.Join(dir, "checkpoint.img"), []byte("half"), 0o600)
	if _, err := s.Open(ctx, ref); !errdefs.IsNotFound(err) {
		t.Errorf("an uncommitted image opens: %v", err)
	}
	if ids, _ := s.List(ctx, images.KindSnapshot); slices.Contains(ids, ref.ID) {
		t.Errorf("an uncommitted image is listed: %v", ids)
	}
	if err := s.Abort(ctx, ref); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(ctx, ref); err == nil {
		t.Error("an aborted image committed")
	}
}

func testEmptyCommit(t *testing.T, s images.Store) {
	ctx := context.Background()
	ref := images.Pause(runtime.NewID())
	if _, err := s.Create(ctx, ref); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(ctx, ref); !errdefs.IsInvalidArgument(err) {
		t.Errorf("commit of nothing: %v, want invalid argument", err)
	}
}

func testCommitReplaces(t *testing.T, s images.Store) {
	ref := images.Pause(runtime.NewID())
	write(t, s, ref, "old")
	dir, err := s.Create(context.Background(), ref)
	if err != nil {
		t.Fatal(err)
	}
	if got := content(t, s, ref); got != "old" {
		t.Errorf("a new image being written hid the committed one: %q", got)
	}
	os.WriteFile(filepath.Join(dir, "checkpoint.img"), []byte("new"), 0o600)
	if err := s.Commit(context.Background(), ref); err != nil {
		t.Fatal(err)
	}
	if got := content(t, s, ref); got != "new" {
		t.Errorf("after a second commit: %q", got)
	}
}

func testLink(t *testing.T, s images.Store) {
	ctx := context.Background()
	src, dst := images.Pause(runtime.NewID()), images.Snapshot(runtime.NewID())
	if err := s.Link(ctx, src, dst); !errdefs.IsNotFound(err) {
		t.Errorf("link from nothing: %v, want not found", err)
	}
	write(t, s, src, "state")
	if err := s.Link(ctx, src, dst); err != nil {
		t.Fatal(err)
	}
	if err := s.Remove(ctx, src); err != nil {
		t.Fatal(err)
	}
	if got := content(t, s, dst); got != "state" {
		t.Errorf("linked image after its source went: %q", got)
	}
}

func testRemoveAndList(t *testing.T, s images.Store) {
	ctx := context.Background()
	a, b := images.Snapshot(runtime.NewID()), images.Snapshot(runtime.NewID())
	write(t, s, a, "a")
	write(t, s, b, "b")
	write(t, s, images.Pause(runtime.NewID()), "p")
	ids, err := s.List(ctx, images.KindSnapshot)
	slices.Sort(ids)
	want := []string{a.ID, b.ID}
	slices.Sort(want)
	if err != nil || !slices.Equal(ids, want) {
		t.Fatalf("list = %v %v, want %v", ids, err, want)
	}
	if err := s.Remove(ctx, a); err != nil {
		t.Fatal(err)
	}
	if err := s.Remove(ctx, a); err != nil {
		t.Errorf("removing a missing image: %v", err)
	}
	if _, err := s.Open(ctx, a); !errdefs.IsNotFound(err) {
		t.Errorf("open removed: %v", err)
	}
	if ids, _ := s.List(ctx, images.KindSnapshot); !slices.Equal(ids, []string{b.ID}) {
		t.Errorf("list after remove = %v", ids)
	}
}

func testSweep(t *testing.T, s images.Store) {
	ctx := context.Background()
	keep, drop := images.Pause(runtime.NewID()), images.Snapshot(runtime.NewID())
	write(t, s, keep, "k")
	write(t, s, drop, "d")
	removed, err := images.Sweep(ctx, s, func(r images.Ref) bool { return r == keep })
	if err != nil || !slices.Equal(removed, []images.Ref{drop}) {
		t.Fatalf("sweep removed %v, %v; want %v", removed, err, drop)
	}
	if !images.Exists(ctx, s, keep) || images.Exists(ctx, s, drop) {
		t.Error("sweep kept the wrong images")
	}
}

func testBadRefs(t *testing.T, s images.Store) {
	ctx := context.Background()
	for _, ref := range []images.Ref{{Kind: images.KindPause, ID: "../escape"}, {Kind: "other", ID: runtime.NewID()}, {Kind: images.KindSnapshot}} {
		if _, err := s.Create(ctx, ref); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("create %+v: %v, want invalid argument", ref, err)
		}
	}
}
