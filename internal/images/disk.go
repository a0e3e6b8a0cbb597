package images

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/forkbox/forkbox/internal/errdefs"
)

// Disk is a Store in a directory tree: root/<kind>/<id> holds a committed
// image, root/<kind>/.new-<id> one being written (and <id>.old, for a
// moment, the image a Commit replaces). Commit is a rename, so a
// crash never leaves a half-written image where Open looks; Link is hard
// links, so a snapshot of a paused sandbox costs no copy.
type Disk struct {
	root string
}

var _ Store = (*Disk)(nil)

// partialPrefix marks images being written.
const partialPrefix = ".new-"

// NewDisk returns the store rooted at root, creating it, and removes the
// images left half-written by a previous process (recovery at start).
func NewDisk(root string) (*Disk, error) {
	var kinds []string
	for _, k := range Kinds {
		kinds = append(kinds, string(k))
	}
	if err := openKinds(root, kinds, 0o700, recoverEntry); err != nil {
		return nil, fmt.Errorf("image store: %w", err)
	}
	return &Disk{root: root}, nil
}

// openKinds creates root's kind directories and settles each entry a
// previous process left in them with settle (recovery at start).
func openKinds(root string, kinds []string, mode os.FileMode, settle func(dir, name string)) error {
	for _, k := range kinds {
		dir := filepath.Join(root, k)
		if err := os.MkdirAll(dir, mode); err != nil {
			return err
		}
		ents, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		for _, e := range ents {
			settle(dir, e.Name())
		}
	}
	return nil
}

// oldSuffix marks a committed image Commit is replacing.
const oldSuffix = ".old"

// recoverEntry settles one entry of a kind's directory after a crash: a
// partial image goes; a replaced image goes if its replacement is in
// place, and is put back if the crash came between Commit's two renames.
func recoverEntry(dir, name string) {
	p := filepath.Join(dir, name)
	switch {
	case strings.HasPrefix(name, partialPrefix):
		os.RemoveAll(p)
	case strings.HasSuffix(name, oldSuffix):
		cur := strings.TrimSuffix(p, oldSuffix)
		if _, err := os.Stat(cur); err == nil {
			os.RemoveAll(p)
		} else {
			os.Rename(p, cur)
		}
	}
}

func (d *Disk) path(ref Ref) string { return filepath.Join(d.root, string(ref.Kind), ref.ID) }
func (d *Disk) partial(ref Ref) string {
	return filepath.Join(d.root, string(ref.Kind), partialPrefix+ref.ID)
}

// Create implements Store.
func (d *Disk) Create(ctx context.Context, ref Ref) (string, error) {
	if err := ref.Validate(); err != nil {
		return "", err
	}
	dir := d.partial(ref)
	if err := os.RemoveAll(dir); err != nil {
		return "", fmt.Errorf("image %s: %w", ref, err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		return "", fmt.Errorf("image %s: %w", ref, err)
	}
	return dir, nil
}

// Commit implements Store.
func (d *Disk) Commit(ctx context.Context, ref Ref) error {
	if err := ref.Validate(); err != nil {
		return err
	}
	src := d.partial(ref)
	if !nonEmpty(src) {
		return fmt.Errorf("image %s: nothing was written: %w", ref, errdefs.ErrInvalidArgument)
	}
	dst := d.path(ref)
	// A directory cannot be renamed over a non-empty one: move the old
	// image aside first, then drop it.
	old := dst + oldSuffix
	if err := os.Rename(dst, old); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("image %s: %w", ref, err)
	}
	if err := os.Rename(src, dst); err != nil {
		os.Rename(old, dst)
		return fmt.Errorf("image %s: %w", ref, err)
	}
	os.RemoveAll(old)
	return nil
}

// Abort implements Store.
func (d *Disk) Abort(ctx context.Context, ref Ref) error {
	if err := ref.Validate(); err != nil {
		return err
	}
	return os.RemoveAll(d.partial(ref))
}

// Open implements Store.
func (d *Disk) Open(ctx context.Context, ref Ref) (string, error) {
	if err := ref.Validate(); err != nil {
		return "", err
	}
	dir := d.path(ref)
	if !nonEmpty(dir) {
		return "", fmt.Errorf("image %s: %w", ref, errdefs.ErrNotFound)
	}
	return dir, nil
}

// Link implements Store with hard links: images are never modified after
// they are committed, so sharing their blocks is safe and free.
func (d *Disk) Link(ctx context.Context, src, dst Ref) error {
	from, err := d.Open(ctx, src)
	if err != nil {
		return err
	}
	to, err := d.Create(ctx, dst)
	if err != nil {
		return err
	}
	if err := linkOrCopyTree(from, to); err != nil {
		os.RemoveAll(to)
		return fmt.Errorf("link image %s to %s: %w", src, dst, err)
	}
	return d.Commit(ctx, dst)
}

// Remove implements Store.
func (d *Disk) Remove(ctx context.Context, ref Ref) error {
	if err := ref.Validate(); err != nil {
		return err
	}
	if err := os.RemoveAll(d.partial(ref)); err != nil {
		return err
	}
	return os.RemoveAll(d.path(ref))
}

// List implements Store.
func (d *Disk) List(ctx context.Context, kind Kind) ([]string, error) {
	ents, err := os.ReadDir(filepath.Join(d.root, string(kind)))
	if err != nil {
		return nil, fmt.Errorf("list images: %w", err)
	}
	var ids []string
	for _, e := range ents {
		if n := e.Name(); e.IsDir() && !strings.HasPrefix(n, partialPrefix) && !strings.HasSuffix(n, oldSuffix) {
			ids = append(ids, n)
		}
	}
	return ids, nil
}

// nonEmpty reports whether dir is a directory with something in it.
func nonEmpty(dir string) bool {
	ents, err := os.ReadDir(dir)
	return err == nil && len(ents) > 0
}
