package images

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"

	"github.com/forkbox/forkbox/internal/errdefs"
)

// ObjectContent is the object store's ContentStore: content/<kind>/<key>
// is an entry's manifest, and its references live in the bucket too, so
// they are cluster-wide: a holder on any node keeps an entry. Each
// reference is two empty marker objects, holds/<kind>/<key>/<holder> (is
// the entry held? one listing) and holders/<holder>/<kind>/<key> (what
// does a holder hold? one listing).
//
// The race it accepts: a last release on one node and a Hold of the same
// entry on another. Hold writes its marker, then checks the manifest;
// removal reads the manifest, deletes it, then lists the markers again and
// writes the manifest back when a holder appeared. A Hold that saw the
// manifest therefore keeps its entry; one that looked in the moment it
// was gone fails with ErrNotFound (and the entry it brought back is
// collected later); an Open on a third node in that moment sees
// ErrNotFound once.
type ObjectContent struct {
	s *objectStore

	mu sync.Mutex
	// local counts this process's holders of each entry, and digest the
	// cache entry each was last seen as: those the cache never evicts.
	local  map[ContentRef]map[Holder]bool
	digest map[ContentRef]string
	// touched are the holders held or set since the store was opened (see
	// releaseStale).
	touched map[Holder]bool
	armed   bool
}

var _ ContentStore = (*ObjectContent)(nil)

// Content is the ContentStore of layers and template images.
func (o *ObjectStore) Content() *ObjectContent {
	c := &ObjectContent{s: &o.objectStore, local: map[ContentRef]map[Holder]bool{}, digest: map[ContentRef]string{},
		touched: map[Holder]bool{}}
	o.cache.mu.Lock()
	o.cache.keep = c.inUse
	o.cache.mu.Unlock()
	return c
}

// inUse reports whether a cache entry is an entry a holder of this
// process holds (called with the cache's lock held).
func (c *ObjectContent) inUse(digest string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for ref, d := range c.digest {
		if d == digest && len(c.local[ref]) > 0 {
			return true
		}
	}
	return false
}

func contentKey(ref ContentRef) string { return path.Join("content", string(ref.Kind), ref.Key) }

func holderPart(h Holder) string { return string(h.Kind) + "/" + escapeID(h.ID) }

func escapeID(id string) string { return strings.NewReplacer("%", "%25", "/", "%2F").Replace(id) }

func unescapeID(s string) string { return strings.NewReplacer("%2F", "/", "%25", "%").Replace(s) }

func holdMarker(ref ContentRef, h Holder) string {
	return path.Join("holds", string(ref.Kind), ref.Key, holderPart(h))
}

func holderMarker(h Holder, ref ContentRef) string {
	return path.Join("holders", holderPart(h), string(ref.Kind), ref.Key)
}

func (c *ObjectContent) stagingRoot(kind ContentKind) string {
	return filepath.Join(c.s.cache.root, "staging", "content-"+string(kind))
}

// Create implements ContentStore.
func (c *ObjectContent) Create(ctx context.Context, ref ContentRef) (string, error) {
	if err := ref.Validate(); err != nil {
		return "", err
	}
	root := c.stagingRoot(ref.Kind)
	if err := os.MkdirAll(root, 0o755); err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp(root, partialPrefix+ref.Key+"-")
	if err != nil {
		return "", err
	}
	return dir, os.Chmod(dir, 0o755)
}

func (c *ObjectContent) isScratch(dir string) bool {
	for _, k := range ContentKinds {
		if filepath.Dir(dir) == c.stagingRoot(k) && strings.HasPrefix(filepath.Base(dir), partialPrefix) {
			return true
		}
	}
	return false
}

// Commit implements ContentStore: h's markers first (an entry never
// exists unheld, even for a moment on another node's Collect), then the
// blobs, then the manifest.
func (c *ObjectContent) Commit(ctx context.Context, ref ContentRef, dir string, h Holder) error {
	if err := checkHolding(h, []ContentRef{ref}); err != nil {
		return err
	}
	if !isDir(dir) {
		return fmt.Errorf("commit %s: %s is not a directory: %w", ref, dir, errdefs.ErrInvalidArgument)
	}
	held, err := c.heldBy(ctx, h)
	if err != nil {
		return err
	}
	if err := c.mark(ctx, h, ref); err != nil {
		return fmt.Errorf("commit %s: %w", ref, err)
	}
	there, err := c.s.b.exists(ctx, contentKey(ref))
	if err == nil && there {
		// Another writer was first: its entry is the committed one.
		c.noteLocal(h, ref, "")
		return os.RemoveAll(dir)
	}
	var digest string
	if err == nil {
		digest, err = c.s.commitTree(ctx, "content "+ref.String(), contentKey(ref), dir)
	}
	if err != nil {
		if !held[ref] {
			c.unmark(context.WithoutCancel(ctx), h, ref)
		}
		return fmt.Errorf("commit %s: %w", ref, err)
	}
	c.noteLocal(h, ref, digest)
	if _, err = c.s.cache.put(digest, dir); err != nil {
		return err
	}
	c.s.cache.noteKey(contentKey(ref), digest)
	return nil
}

// Abort implements ContentStore.
func (c *ObjectContent) Abort(ctx context.Context, dir string) error {
	if !c.isScratch(dir) {
		return fmt.Errorf("%s is not an entry being written: %w", dir, errdefs.ErrInvalidArgument)
	}
	return os.RemoveAll(dir)
}

// Open implements ContentStore.
func (c *ObjectContent) Open(ctx context.Context, ref ContentRef) (string, error) {
	if err := ref.Validate(); err != nil {
		return "", err
	}
	dir, err := c.s.openTree(ctx, "content "+ref.String(), contentKey(ref))
	if err == nil {
		c.mu.Lock()
		c.digest[ref] = filepath.Base(dir)
		c.mu.Unlock()
	}
	return dir, err
}

// List implements ContentStore.
func (c *ObjectContent) List(ctx context.Context, kind ContentKind) ([]ContentRef, error) {
	objs, err := c.s.b.list(ctx, path.Join("content", string(kind)))
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", kind, err)
	}
	var out []ContentRef
	for _, o := range objs {
		if ref := (ContentRef{kind, path.Base(o.Key)}); ref.Validate() == nil {
			out = append(out, ref)
		}
	}
	return out, nil
}

// noteLocal records that h of this process holds ref (and, when known,
// which cache entry it is).
func (c *ObjectContent) noteLocal(h Holder, ref ContentRef, digest string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.local[ref] == nil {
		c.local[ref] = map[Holder]bool{}
	}
	c.local[ref][h] = true
	c.touched[h] = true
	if digest != "" {
		c.digest[ref] = digest
	}
}

func (c *ObjectContent) forgetLocal(h Holder, ref ContentRef) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.local[ref], h)
	if len(c.local[ref]) == 0 {
		delete(c.local, ref)
	}
}
