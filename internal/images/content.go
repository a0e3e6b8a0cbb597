package images

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/forkbox/forkbox/internal/errdefs"
)

// ContentKind is a kind of content-addressed entry of template builds.
type ContentKind string

// The kinds of content.
const (
	// KindLayer is a build step's root filesystem, a whole tree sharing
	// the files the step did not change with its parent by hard link.
	KindLayer ContentKind = "layers"
	// KindTemplateImage is a start-ready template's memory and files.
	KindTemplateImage ContentKind = "images"
)

// ContentKinds lists every kind of content.
var ContentKinds = []ContentKind{KindLayer, KindTemplateImage}

// ContentRef names one entry: its kind and its key (the hex digest of what
// made it: a build step's cache key, an image's inputs).
type ContentRef struct {
	Kind ContentKind
	Key  string
}

// String names the ref as kind/key, for logs.
func (r ContentRef) String() string { return string(r.Kind) + "/" + r.Key }

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

// HolderKind is what holds a reference to content.
type HolderKind string

// The kinds of holder.
const (
	// HolderTemplate is a template (ID: the template id) — its builds'
	// layers and images, while it exists.
	HolderTemplate HolderKind = "template"
	// HolderBuild is a build in progress (ID: the build id).
	HolderBuild HolderKind = "build"
	// HolderSandbox is a sandbox (any state) running on the content.
	HolderSandbox HolderKind = "sandbox"
	// HolderSnapshot is a snapshot whose sandbox ran on the content.
	HolderSnapshot HolderKind = "snapshot"
)

// Reference says that Holder uses content Ref.
type Reference struct {
	Holder HolderKind
	ID     string
	Ref    ContentRef
}

// ContentStore keeps the content-addressed layers and images of template
// builds. Entries are directories: Create hands out a local one to write,
// Path names where a committed one is read, so an object-store backend
// implements it with a local cache (upload at Commit, fetch on Path/Has)
// instead of a rewrite of its callers. Which entries stay is decided by
// Collect from typed references. Its conformance suite is
// imagestest.RunContent; Content is the disk backend.
type ContentStore interface {
	// Path is where committed entry ref is (or would be) read.
	Path(ref ContentRef) string
	// Has reports whether ref is committed.
	Has(ref ContentRef) bool
	// Create returns a new empty local directory to write entry ref into;
	// several writers may create one ref at once and the first Commit wins.
	Create(ref ContentRef) (dir string, err error)
	// Commit seals dir (from Create) as ref; a later writer's dir is dropped.
	Commit(ref ContentRef, dir string) error
	// CommitOn is Commit for an entry made on layer on (see MadeOn).
	CommitOn(ref ContentRef, dir string, on ContentRef) error
	// Abort drops a directory from Create.
	Abort(dir string) error
	// MadeOn maps each layer to the committed entries of kind made on it.
	MadeOn(kind ContentKind) map[ContentRef][]ContentRef
	// RefOf returns the entry a path from Path names (false for others).
	RefOf(path string) (ContentRef, bool)
	// Collect removes every committed entry no reference holds and
	// returns what it removed.
	Collect(ctx context.Context, refs []Reference) ([]ContentRef, error)
}

var _ ContentStore = (*Content)(nil)

// Content is the content-addressed store of template layers and images on
// disk: root/<kind>/<key> is a committed entry, root/<kind>/.new-… one
// being written or removed. Entries are immutable once committed. Which
// entries stay is decided by Collect from typed references; a crash
// leaves only .new- entries, which OpenContent removes.
type Content struct {
	root string
}

// OpenContent returns the store rooted at root, creating it, and removes
// what a previous process left half-written or half-removed.
func OpenContent(root string) (*Content, error) {
	for _, k := range ContentKinds {
		dir := filepath.Join(root, string(k))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("content store: %w", err)
		}
		ents, err := os.ReadDir(dir)
		if err != nil {
			return nil, fmt.Errorf("content store: %w", err)
		}
		for _, e := range ents {
			// .tmp- names the partial images of stores before this one.
			if strings.HasPrefix(e.Name(), partialPrefix) || strings.Contains(e.Name(), ".tmp-") {
				os.RemoveAll(filepath.Join(dir, e.Name()))
			}
		}
	}
	return &Content{root: root}, nil
}

// Path is where committed entry ref is (or would be).
func (c *Content) Path(ref ContentRef) string {
	return filepath.Join(c.root, string(ref.Kind), ref.Key)
}

// Has reports whether ref is committed.
func (c *Content) Has(ref ContentRef) bool {
	_, err := os.Stat(c.Path(ref))
	return err == nil
}

// Create returns a new empty directory to write entry ref into. Several
// writers may create the same ref at once; the first Commit wins.
func (c *Content) Create(ref ContentRef) (string, error) {
	if err := ref.Validate(); err != nil {
		return "", err
	}
	return os.MkdirTemp(filepath.Join(c.root, string(ref.Kind)), partialPrefix+ref.Key+"-")
}

// Commit seals dir (from Create) as ref. When ref is already committed
// (another writer of the same content was first), dir is dropped.
func (c *Content) Commit(ref ContentRef, dir string) error {
	if err := ref.Validate(); err != nil {
		return err
	}
	if err := os.Rename(dir, c.Path(ref)); err != nil {
		if c.Has(ref) {
			return c.Abort(dir)
		}
		return fmt.Errorf("commit %s: %w", ref, err)
	}
	return nil
}

// Abort drops a directory from Create.
func (c *Content) Abort(dir string) error {
	if !strings.HasPrefix(filepath.Base(dir), partialPrefix) {
		return fmt.Errorf("%s is not an entry being written: %w", dir, errdefs.ErrInvalidArgument)
	}
	return os.RemoveAll(dir)
}

// onSuffix names the file beside an entry that names the layer the entry
// was made on.
const onSuffix = ".on"

// CommitOn is Commit for an entry made on layer on (a template image of a
// sandbox running on that root filesystem): MadeOn finds it from the layer.
func (c *Content) CommitOn(ref ContentRef, dir string, on ContentRef) error {
	if err := on.Validate(); err != nil {
		return err
	}
	side := c.Path(ref) + onSuffix
	if err := os.WriteFile(side+".tmp", []byte(on.Key), 0o644); err != nil {
		return err
	}
	if err := os.Rename(side+".tmp", side); err != nil {
		return err
	}
	return c.Commit(ref, dir)
}

// MadeOn maps each layer to the committed entries of kind made on it (see
// CommitOn): what a sandbox running on that layer may still read (its
// template's image).
func (c *Content) MadeOn(kind ContentKind) map[ContentRef][]ContentRef {
	all, _ := c.List(kind)
	out := map[ContentRef][]ContentRef{}
	for _, ref := range all {
		if b, err := os.ReadFile(c.Path(ref) + onSuffix); err == nil {
			on := ContentRef{KindLayer, string(b)}
			out[on] = append(out[on], ref)
		}
	}
	return out
}

// RefOf returns the entry a path names (a sandbox's root filesystem, a
// template's image directory), if it is one of this store's.
func (c *Content) RefOf(path string) (ContentRef, bool) {
	rel, err := filepath.Rel(c.root, filepath.Clean(path))
	if err != nil {
		return ContentRef{}, false
	}
	kind, key, ok := strings.Cut(rel, string(filepath.Separator))
	ref := ContentRef{ContentKind(kind), key}
	if !ok || ref.Validate() != nil {
		return ContentRef{}, false
	}
	return ref, true
}

// List returns the committed entries of a kind.
func (c *Content) List(kind ContentKind) ([]ContentRef, error) {
	ents, err := os.ReadDir(filepath.Join(c.root, string(kind)))
	if err != nil {
		return nil, err
	}
	var out []ContentRef
	for _, e := range ents {
		if ref := (ContentRef{kind, e.Name()}); ref.Validate() == nil {
			out = append(out, ref)
		}
	}
	return out, nil
}

// Counts returns how many references each entry has.
func Counts(refs []Reference) map[ContentRef]int {
	n := map[ContentRef]int{}
	for _, r := range refs {
		n[r.Ref]++
	}
	return n
}

// Collect removes every committed entry no reference holds and returns
// what it removed. An entry goes by a rename to a .new- name first, so a
// crash mid-removal leaves nothing Path finds. The caller makes sure no
// new reference appears meanwhile (the build service holds its lock).
func (c *Content) Collect(ctx context.Context, refs []Reference) ([]ContentRef, error) {
	counts := Counts(refs)
	var removed []ContentRef
	for _, k := range ContentKinds {
		all, err := c.List(k)
		if err != nil {
			return removed, err
		}
		for _, ref := range all {
			if counts[ref] > 0 {
				continue
			}
			gone := filepath.Join(c.root, string(k), partialPrefix+"gc-"+ref.Key)
			if err := os.Rename(c.Path(ref), gone); err != nil {
				return removed, fmt.Errorf("collect %s: %w", ref, err)
			}
			if err := os.RemoveAll(gone); err != nil {
				return removed, fmt.Errorf("collect %s: %w", ref, err)
			}
			os.Remove(c.Path(ref) + onSuffix)
			removed = append(removed, ref)
		}
	}
	return removed, nil
}
