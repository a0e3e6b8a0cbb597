package images

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/forkbox/forkbox/internal/errdefs"
)

// ContentKind is a kind of content-addressed entry.
type ContentKind string

// The kinds of content.
const (
	// KindLayer is a root filesystem: an OCI image unpacked, a built-in
	// template's imported, or a build step's result (a whole tree sharing
	// the files the step did not change with its parent by hard link).
	KindLayer ContentKind = "layers"
	// KindTemplateImage is a template's booted sandbox, memory and files:
	// what a sandbox of the template is restored from.
	KindTemplateImage ContentKind = "templates"
)

// ContentKinds lists every kind of content.
var ContentKinds = []ContentKind{KindLayer, KindTemplateImage}

// ContentRef names one entry: its kind and its key (the hex digest of what
// made it: a build step's cache key, an image's inputs).
type ContentRef struct {
	Kind ContentKind `json:"kind"`
	Key  string      `json:"key"`
}

// Layer is the ref of layer key.
func Layer(key string) ContentRef { return ContentRef{KindLayer, key} }

// TemplateImage is the ref of template image key.
func TemplateImage(key string) ContentRef { return ContentRef{KindTemplateImage, key} }

// String names the ref as kind/key, for logs.
func (r ContentRef) String() string { return string(r.Kind) + "/" + r.Key }

// IsZero reports the zero ref (no entry).
func (r ContentRef) IsZero() bool { return r == ContentRef{} }

// Validate refuses refs that could escape the store.
func (r ContentRef) Validate() error {
	if !slices.Contains(ContentKinds, r.Kind) {
		return fmt.Errorf("content kind %q: %w", r.Kind, errdefs.ErrInvalidArgument)
	}
	if len(r.Key) < 16 || len(r.Key) > 128 || strings.Trim(r.Key, "0123456789abcdef") != "" {
		return fmt.Errorf("content key %q: want 16..128 hex digits: %w", r.Key, errdefs.ErrInvalidArgument)
	}
	return nil
}

// Find returns the first ref of kind in refs: a sandbox runs on at most one
// layer and was started from at most one template image.
func Find(refs []ContentRef, kind ContentKind) (ContentRef, bool) {
	for _, r := range refs {
		if r.Kind == kind {
			return r, true
		}
	}
	return ContentRef{}, false
}

// HolderKind is what holds references to content.
type HolderKind string

// The kinds of holder. Each kind has one owner that records its holders'
// references and releases them when the holder goes.
const (
	// HolderSandbox is a sandbox, in any state but killed, by id: what it
	// runs on (the sandbox Manager).
	HolderSandbox HolderKind = "sandbox"
	// HolderSnapshot is a snapshot by id: what its sandboxes will run on
	// (the sandbox Manager).
	HolderSnapshot HolderKind = "snapshot"
	// HolderTemplate is a user-built template by id: its kept builds'
	// layers and images (the template build service).
	HolderTemplate HolderKind = "template"
	// HolderBuild is a build in progress by build id: what it made or
	// reused so far (the template build service).
	HolderBuild HolderKind = "build"
	// HolderBuiltin is a template forkbox ships, by id: its booted image
	// (the daemon, through Manager.WarmTemplate).
	HolderBuiltin HolderKind = "builtin"
)

// Holder is one holder of references.
type Holder struct {
	Kind HolderKind `json:"kind"`
	ID   string     `json:"id"`
}

// String names the holder as kind:id, for logs and errors.
func (h Holder) String() string { return string(h.Kind) + ":" + h.ID }

func (h Holder) validate() error {
	switch h.Kind {
	case HolderSandbox, HolderSnapshot, HolderTemplate, HolderBuild, HolderBuiltin:
	default:
		return fmt.Errorf("holder kind %q: %w", h.Kind, errdefs.ErrInvalidArgument)
	}
	if h.ID == "" {
		return fmt.Errorf("holder %s has no id: %w", h.Kind, errdefs.ErrInvalidArgument)
	}
	return nil
}

// Reference says that Holder uses content Ref.
type Reference struct {
	Holder Holder
	Ref    ContentRef
}

// ContentStore keeps content-addressed root filesystems (layers) and
// template images, and decides from typed references which stay: an entry
// lives while a holder holds it, and goes at once when its last holder
// releases it. Entries are immutable once committed.
//
// The references are recorded by their owners (see HolderKind): each
// records what its holders hold in its own records (a sandbox's, a
// snapshot's or a template's content refs) and sets them here again at
// start. Until the first Collect after opening, a last release removes
// nothing, so an owner that sets its holders after another has released
// one of its own never finds a shared entry gone; Collect then removes what
// no holder holds and arms removal on last release.
//
// Entries are directories in and out (Create hands out a local one to
// write, Open a local one to read), so an object-store backend implements
// the interface with a local cache — upload at Commit, download on Open —
// and its callers stay as they are. Its conformance suite is
// imagestest.RunContent; Content is the disk backend.
type ContentStore interface {
	// Create returns a new, empty local directory to write entry ref into;
	// several writers may create one ref at once.
	Create(ctx context.Context, ref ContentRef) (dir string, err error)
	// Commit seals dir as ref and records that h holds it, in one step: an
	// entry never exists unheld. dir is one from Create, or a local
	// directory of the caller's own that it hands over (a build's scratch);
	// either way the caller must not use it after. When ref is committed
	// already (another writer was first) dir is dropped and h holds the
	// committed entry.
	Commit(ctx context.Context, ref ContentRef, dir string, h Holder) error
	// Abort drops a directory from Create.
	Abort(ctx context.Context, dir string) error
	// Open returns a local directory holding committed entry ref, to read
	// (never to write); ErrNotFound when there is none. The caller holds
	// ref, or it may go while read.
	Open(ctx context.Context, ref ContentRef) (dir string, err error)
	// List returns the committed entries of a kind.
	List(ctx context.Context, kind ContentKind) ([]ContentRef, error)
	// Hold records that h holds refs too. It fails with ErrNotFound, and
	// holds none of them, when one is not committed: taking a reference
	// and checking the entry is there are one step.
	Hold(ctx context.Context, h Holder, refs ...ContentRef) error
	// Set makes refs exactly what h holds (none: h holds nothing), with
	// Hold's check; entries h no longer holds go if nothing else does.
	Set(ctx context.Context, h Holder, refs []ContentRef) error
	// Release drops every reference of h; the entries nothing holds any
	// more go.
	Release(ctx context.Context, h Holder) error
	// References lists every reference held.
	References(ctx context.Context) ([]Reference, error)
	// Collect removes every committed entry no holder holds and returns
	// what it removed; from then on a last release removes at once.
	Collect(ctx context.Context) ([]ContentRef, error)
}

// Import commits a copy of local directory src as entry ref held by h,
// sharing src's files by hard link where it can (the same filesystem):
// src must never be written again. An entry already there is only held.
func Import(ctx context.Context, s ContentStore, ref ContentRef, src string, h Holder) error {
	if err := s.Hold(ctx, h, ref); err == nil {
		return nil
	}
	dir, err := s.Create(ctx, ref)
	if err != nil {
		return err
	}
	if err := linkOrCopyTree(src, dir); err != nil {
		s.Abort(context.WithoutCancel(ctx), dir)
		return fmt.Errorf("import %s into %s: %w", src, ref, err)
	}
	return s.Commit(ctx, ref, dir, h)
}

// Export copies committed entry ref into local directory dst, which must
// not exist, sharing its files by hard link where it can: a copy for
// others to read (another daemon's template cache), never to write.
func Export(ctx context.Context, s ContentStore, ref ContentRef, dst string) error {
	src, err := s.Open(ctx, ref)
	if err != nil {
		return err
	}
	if err := os.Mkdir(dst, 0o755); err != nil {
		return err
	}
	if err := linkOrCopyTree(src, dst); err != nil {
		os.RemoveAll(dst)
		return fmt.Errorf("export %s to %s: %w", ref, dst, err)
	}
	return nil
}
