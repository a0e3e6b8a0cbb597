package images

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/forkbox/forkbox/internal/errdefs"
)

// Content is the disk backend of ContentStore: root/<kind>/<key> is a
// committed entry, root/<kind>/.new-… one being written, and root/.gc/…
// one being removed (renamed there first, so a crash mid-removal leaves
// nothing Open finds). Which holder holds what is kept in memory: the holders' owners
// record it with their own records and set it again at start (see
// ContentStore), so a crash loses nothing and leaves no reference of a
// holder that is gone.
type Content struct {
	root string
	gc   remover

	mu sync.Mutex
	// holds maps each holder to the entries it holds and counts each
	// entry's holders; guarded by mu.
	holds  map[Holder]map[ContentRef]bool
	counts map[ContentRef]int
	// armed is set by the first Collect: a last release removes at once.
	armed bool
	// seq names the directories of entries being removed.
	seq int
}

var _ ContentStore = (*Content)(nil)

// trashDir is where entries being removed wait for the remover.
const trashDir = ".gc"

// OpenContent returns the store rooted at root, creating it, and removes
// what a previous process left half-written or half-removed.
func OpenContent(root string) (*Content, error) {
	trash := filepath.Join(root, trashDir)
	if err := os.RemoveAll(trash); err != nil {
		return nil, fmt.Errorf("content store: %w", err)
	}
	if err := os.MkdirAll(trash, 0o700); err != nil {
		return nil, fmt.Errorf("content store: %w", err)
	}
	var kinds []string
	for _, k := range ContentKinds {
		kinds = append(kinds, string(k))
	}
	err := openKinds(root, kinds, 0o755, func(dir, name string) {
		// .tmp- and .on name the partial images and the side files of the
		// store before this one.
		if strings.HasPrefix(name, partialPrefix) || strings.Contains(name, ".tmp-") || strings.HasSuffix(name, ".on") {
			os.RemoveAll(filepath.Join(dir, name))
		}
	})
	if err != nil {
		return nil, fmt.Errorf("content store: %w", err)
	}
	return &Content{root: root, holds: map[Holder]map[ContentRef]bool{}, counts: map[ContentRef]int{}}, nil
}

// Root is the directory the store keeps its entries in.
func (c *Content) Root() string { return c.root }

func (c *Content) path(ref ContentRef) string {
	return filepath.Join(c.root, string(ref.Kind), ref.Key)
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

// Create implements ContentStore.
func (c *Content) Create(ctx context.Context, ref ContentRef) (string, error) {
	if err := ref.Validate(); err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp(filepath.Join(c.root, string(ref.Kind)), partialPrefix+ref.Key+"-")
	if err != nil {
		return "", err
	}
	// A layer's directory is its root filesystem's /: everyone traverses
	// it (the data dir above keeps others out).
	return dir, os.Chmod(dir, 0o755)
}

// scratch checks that dir is one Create handed out for an entry of kind.
func (c *Content) scratch(dir string, kind ContentKind) error {
	if filepath.Dir(dir) != filepath.Join(c.root, string(kind)) || !strings.HasPrefix(filepath.Base(dir), partialPrefix) {
		return fmt.Errorf("%s is not a %s entry being written: %w", dir, kind, errdefs.ErrInvalidArgument)
	}
	return nil
}

// Commit implements ContentStore.
func (c *Content) Commit(ctx context.Context, ref ContentRef, dir string, h Holder) error {
	if err := ref.Validate(); err != nil {
		return err
	}
	if err := h.validate(); err != nil {
		return err
	}
	if c.scratch(dir, ref.Kind) != nil {
		// A directory of the caller's: made a scratch of the store first,
		// so what goes on below is the same.
		var err error
		if dir, err = c.adopt(ctx, ref, dir); err != nil {
			return err
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if isDir(c.path(ref)) {
		// Another writer's entry is the committed one.
		if err := c.trashLocked(dir, ref); err != nil {
			return fmt.Errorf("commit %s: %w", ref, err)
		}
	} else if err := os.Rename(dir, c.path(ref)); err != nil {
		return fmt.Errorf("commit %s: %w", ref, err)
	}
	c.holdLocked(h, ref)
	return nil
}

// adopt moves a directory of the caller's to a new scratch of ref: a
// rename, or a copy (and removal) across filesystems.
func (c *Content) adopt(ctx context.Context, ref ContentRef, dir string) (string, error) {
	if !isDir(dir) {
		return "", fmt.Errorf("commit %s: %s is not a directory: %w", ref, dir, errdefs.ErrInvalidArgument)
	}
	tmp, err := c.Create(ctx, ref)
	if err != nil {
		return "", err
	}
	if err := os.Remove(tmp); err != nil {
		return "", err
	}
	err = os.Rename(dir, tmp)
	if isCrossDevice(err) {
		if err = os.Mkdir(tmp, 0o755); err == nil {
			err = linkOrCopyTree(dir, tmp)
		}
		if err == nil {
			err = os.RemoveAll(dir)
		}
	}
	if err != nil {
		os.RemoveAll(tmp)
		return "", fmt.Errorf("commit %s: %w", ref, err)
	}
	return tmp, nil
}

// Abort implements ContentStore.
func (c *Content) Abort(ctx context.Context, dir string) error {
	for _, k := range ContentKinds {
		if c.scratch(dir, k) == nil {
			return os.RemoveAll(dir)
		}
	}
	return fmt.Errorf("%s is not an entry being written: %w", dir, errdefs.ErrInvalidArgument)
}

// Open implements ContentStore.
func (c *Content) Open(ctx context.Context, ref ContentRef) (string, error) {
	if err := ref.Validate(); err != nil {
		return "", err
	}
	if p := c.path(ref); isDir(p) {
		return p, nil
	}
	return "", fmt.Errorf("content %s: %w", ref, errdefs.ErrNotFound)
}

// List implements ContentStore.
func (c *Content) List(ctx context.Context, kind ContentKind) ([]ContentRef, error) {
	ents, err := os.ReadDir(filepath.Join(c.root, string(kind)))
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", kind, err)
	}
	var out []ContentRef
	for _, e := range ents {
		if ref := (ContentRef{kind, e.Name()}); e.IsDir() && ref.Validate() == nil {
			out = append(out, ref)
		}
	}
	return out, nil
}

// Flush waits until the entries removed so far are gone from disk (they
// are unreachable at once; their files are removed in the background).
func (c *Content) Flush() { c.gc.wait() }

// remover deletes, one at a time in the background, the directories of
// entries already renamed out of the way: a release returns at once, and
// removals never pile up in parallel on the disk.
type remover struct {
	mu      sync.Mutex
	cond    sync.Cond
	pending []string // guarded by mu
	running bool     // a removal goroutine runs; guarded by mu
}

func (r *remover) add(dir string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cond.L = &r.mu
	r.pending = append(r.pending, dir)
	if !r.running {
		r.running = true
		go r.loop()
	}
}

func (r *remover) loop() {
	for {
		r.mu.Lock()
		if len(r.pending) == 0 {
			r.running = false
			r.cond.Broadcast()
			r.mu.Unlock()
			return
		}
		dir := r.pending[0]
		r.pending = r.pending[1:]
		r.mu.Unlock()
		// A failure leaves a .new- directory, which the next start removes.
		os.RemoveAll(dir)
	}
}

func (r *remover) wait() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cond.L = &r.mu
	for r.running || len(r.pending) > 0 {
		r.cond.Wait()
	}
}

// linkOrCopyTree recreates src's tree in dst (which exists): files as hard
// links to src's, or copies across filesystems.
func linkOrCopyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil || rel == "." {
			return err
		}
		target := filepath.Join(dst, rel)
		switch {
		case de.IsDir():
			return os.Mkdir(target, 0o755)
		case de.Type()&fs.ModeSymlink != 0:
			l, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(l, target)
		}
		if err := os.Link(p, target); err == nil || !errors.Is(err, fs.ErrPermission) && !isCrossDevice(err) {
			return err
		}
		return copyFile(p, target)
	})
}
