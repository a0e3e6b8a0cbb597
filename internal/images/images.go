// Package images is the one owner of images on disk: everything a sandbox
// is booted or restored from. It has two parts, one store each, both rooted
// in the data dir's images directory and made by the daemon:
//
//   - Store (disk backend Disk) keeps checkpoint images by id: a paused
//     sandbox's memory and files (KindPause), a snapshot's (KindSnapshot).
//     Each belongs to its one sandbox or snapshot; the Manager asks for a
//     directory to checkpoint into and one to restore from, and never builds
//     a path itself.
//   - ContentStore (disk backend Content) keeps content-addressed entries:
//     root filesystems (KindLayer: an OCI image unpacked, a build step's
//     result) and template images (KindTemplateImage: a template's booted
//     sandbox, built-in or user-built, and a built-in's images of other
//     shapes). Entries are shared, so which stay
//     is decided by typed references (Holder: kind + id) that their owners
//     record and set; an entry goes as soon as its last holder releases it.
//
// Both seal what they are given atomically (written aside, committed by a
// rename), so a crash never leaves half an image where one is read; opening
// a store removes what a crash left half-written. Both hand out local
// directories in and out, so an object-store backend (the cluster's S3)
// implements the same interfaces with a local cache: upload on Commit,
// download on Open. The conformance suites in imagestest (Run, RunContent)
// hold every implementation to the same behaviour.
package images

import (
	"context"
	"fmt"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/runtime"
)

// Kind is what an image is of.
type Kind string

// The kinds of image.
const (
	// KindPause is a paused sandbox's state, one per sandbox (ID is the
	// sandbox's id); it goes when the sandbox resumes or dies.
	KindPause Kind = "paused"
	// KindSnapshot is a snapshot's state (ID is the snapshot's id).
	KindSnapshot Kind = "snapshots"
)

// Kinds lists every kind, for recovery.
var Kinds = []Kind{KindPause, KindSnapshot}

// Ref names one image.
type Ref struct {
	Kind Kind
	ID   string
}

// Pause is the ref of sandbox id's pause image.
func Pause(id string) Ref { return Ref{KindPause, id} }

// Snapshot is the ref of snapshot id's image.
func Snapshot(id string) Ref { return Ref{KindSnapshot, id} }

// String names the ref as kind/id, for logs.
func (r Ref) String() string { return string(r.Kind) + "/" + r.ID }

// Validate refuses refs that could escape the store (ids are runtime ids).
func (r Ref) Validate() error {
	switch r.Kind {
	case KindPause, KindSnapshot:
	default:
		return fmt.Errorf("image kind %q: %w", r.Kind, errdefs.ErrInvalidArgument)
	}
	return runtime.ValidateID(r.ID)
}

// Store keeps images. Images are immutable once committed: a new state is a
// new image (or replaces the old one whole), so committed images may share
// their bytes. Implementations are safe for concurrent use on distinct refs.
type Store interface {
	// Create starts a new image and returns the empty local directory to
	// write it into (runtime.Checkpointer.Checkpoint's imageDir). Until
	// Commit the image does not exist: Open does not find it and a crash
	// leaves nothing Recover keeps. A committed image of the same ref stays
	// until Commit replaces it.
	Create(ctx context.Context, ref Ref) (dir string, err error)
	// Commit seals the image written into Create's directory as ref,
	// replacing any committed image of that ref. An empty directory is
	// ErrInvalidArgument (the writer wrote nothing).
	Commit(ctx context.Context, ref Ref) error
	// Abort drops an image being written (after a failed checkpoint).
	Abort(ctx context.Context, ref Ref) error
	// Open returns a local directory holding committed image ref, to
	// restore from; ErrNotFound when there is none.
	Open(ctx context.Context, ref Ref) (dir string, err error)
	// Link commits dst as an image with src's content, sharing it where the
	// backend can (a snapshot of a paused sandbox). src must be committed.
	Link(ctx context.Context, src, dst Ref) error
	// Remove deletes committed image ref and any image being written under
	// it; a missing image is not an error.
	Remove(ctx context.Context, ref Ref) error
	// List returns the ids of the committed images of a kind.
	List(ctx context.Context, kind Kind) ([]string, error)
}

// Exists reports whether ref is a committed image of s. A store that can
// tell without making the image local (an object store: Open would
// download it) says so with a method of its own.
func Exists(ctx context.Context, s Store, ref Ref) bool {
	if e, ok := s.(interface {
		Exists(context.Context, Ref) (bool, error)
	}); ok {
		there, err := e.Exists(ctx, ref)
		return err == nil && there
	}
	_, err := s.Open(ctx, ref)
	return err == nil
}

// Staged returns the directory of an image of ref that Create began in an
// earlier process and nothing committed or aborted, when s keeps those
// across restarts (an object store: a pause's upload takes seconds, and a
// daemon killed during it would otherwise lose the sandbox it stopped).
// Commit seals it as usual.
func Staged(s Store, ref Ref) (string, bool) {
	if st, ok := s.(interface{ Staged(Ref) (string, bool) }); ok {
		return st.Staged(ref)
	}
	return "", false
}

// DropStaged removes the staged images Staged would return, once recovery
// has committed those it keeps, and returns their refs.
func DropStaged(s Store) []Ref {
	if st, ok := s.(interface{ DropStaged() []Ref }); ok {
		return st.DropStaged()
	}
	return nil
}

// Sweep removes every committed image for which keep is false — after a
// restart, images no record refers to (a daemon that died between writing
// an image and recording it, or between forgetting a record and removing
// its image). It returns the refs removed.
func Sweep(ctx context.Context, s Store, keep func(Ref) bool) ([]Ref, error) {
	var removed []Ref
	for _, k := range Kinds {
		ids, err := s.List(ctx, k)
		if err != nil {
			return removed, err
		}
		for _, id := range ids {
			ref := Ref{k, id}
			if keep(ref) {
				continue
			}
			if err := s.Remove(ctx, ref); err != nil {
				return removed, err
			}
			removed = append(removed, ref)
		}
	}
	return removed, nil
}
