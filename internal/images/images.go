// Package images is the one owner of checkpoint images: a paused sandbox's
// memory and files, and snapshots (next: template layers). It names images
// (Ref), decides where their bytes live, seals them atomically and
// recovers after a crash; the sandbox Manager asks it for a directory to
// checkpoint into and one to restore from, and never builds a path itself.
//
// Store is small on purpose: Disk keeps images in a directory tree, and an
// object-store backend (the cluster's S3) can implement the same interface
// by uploading on Commit and downloading into a local cache on Open. The
// conformance suite in imagestest holds every implementation to the same
// behaviour.
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

// Exists reports whether ref is a committed image of s.
func Exists(ctx context.Context, s Store, ref Ref) bool {
	_, err := s.Open(ctx, ref)
	return err == nil
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
