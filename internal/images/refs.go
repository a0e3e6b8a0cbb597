package images

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/forkbox/forkbox/internal/errdefs"
)

// This file is Content's reference counting: who holds which entry, and
// the removal of an entry when its last holder lets go.

// Hold implements ContentStore.
func (c *Content) Hold(ctx context.Context, h Holder, refs ...ContentRef) error {
	return c.hold(h, refs, false)
}

// Set implements ContentStore.
func (c *Content) Set(ctx context.Context, h Holder, refs []ContentRef) error {
	return c.hold(h, refs, true)
}

// hold makes h hold refs, if they are all committed, and with only, no
// other entry.
func (c *Content) hold(h Holder, refs []ContentRef, only bool) error {
	if err := checkHolding(h, refs); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.committedLocked(refs); err != nil {
		return err
	}
	for _, ref := range refs {
		c.holdLocked(h, ref)
	}
	if !only {
		return nil
	}
	var errs []error
	for ref := range c.holds[h] {
		if !slices.Contains(refs, ref) {
			errs = append(errs, c.dropLocked(h, ref))
		}
	}
	return errors.Join(errs...)
}

// Release implements ContentStore.
func (c *Content) Release(ctx context.Context, h Holder) error {
	if err := h.validate(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	for ref := range c.holds[h] {
		errs = append(errs, c.dropLocked(h, ref))
	}
	return errors.Join(errs...)
}

// References implements ContentStore.
func (c *Content) References(ctx context.Context) ([]Reference, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []Reference
	for h, refs := range c.holds {
		for ref := range refs {
			out = append(out, Reference{Holder: h, Ref: ref})
		}
	}
	slices.SortFunc(out, func(a, b Reference) int {
		return strings.Compare(a.Holder.String()+" "+a.Ref.String(), b.Holder.String()+" "+b.Ref.String())
	})
	return out, nil
}

// Collect implements ContentStore.
func (c *Content) Collect(ctx context.Context) ([]ContentRef, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var removed []ContentRef
	for _, k := range ContentKinds {
		all, err := c.List(ctx, k)
		if err != nil {
			return removed, err
		}
		for _, ref := range all {
			if c.counts[ref] > 0 {
				continue
			}
			if err := c.unlinkLocked(ref); err != nil {
				return removed, err
			}
			removed = append(removed, ref)
		}
	}
	c.armed = true
	return removed, nil
}

// checkHolding validates a holder and the refs it is to hold (every
// content backend's Hold, Set and Commit check the same).
func checkHolding(h Holder, refs []ContentRef) error {
	if err := h.validate(); err != nil {
		return err
	}
	for _, ref := range refs {
		if err := ref.Validate(); err != nil {
			return err
		}
	}
	return nil
}

// committedLocked fails with ErrNotFound naming the refs not committed.
func (c *Content) committedLocked(refs []ContentRef) error {
	var missing []string
	for _, ref := range refs {
		if !isDir(c.path(ref)) {
			missing = append(missing, ref.String())
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("content %s: %w", strings.Join(missing, ", "), errdefs.ErrNotFound)
	}
	return nil
}

// holdLocked records that h holds ref (once, however often it is held).
func (c *Content) holdLocked(h Holder, ref ContentRef) {
	set := c.holds[h]
	if set == nil {
		set = map[ContentRef]bool{}
		c.holds[h] = set
	}
	if !set[ref] {
		set[ref] = true
		c.counts[ref]++
	}
}

// dropLocked records that h no longer holds ref, removing ref when it was
// its last holder (once armed).
func (c *Content) dropLocked(h Holder, ref ContentRef) error {
	delete(c.holds[h], ref)
	if len(c.holds[h]) == 0 {
		delete(c.holds, h)
	}
	c.counts[ref]--
	if c.counts[ref] > 0 {
		return nil
	}
	delete(c.counts, ref)
	if !c.armed || !isDir(c.path(ref)) {
		return nil
	}
	return c.unlinkLocked(ref)
}

// unlinkLocked renames committed entry ref out of the way (Open no longer
// finds it) and hands it to the background remover.
func (c *Content) unlinkLocked(ref ContentRef) error {
	if err := c.trashLocked(c.path(ref), ref); err != nil {
		return fmt.Errorf("remove %s: %w", ref, err)
	}
	return nil
}

// trashLocked moves dir (an entry, or a writer's directory of ref) into the
// trash and hands it to the background remover.
func (c *Content) trashLocked(dir string, ref ContentRef) error {
	c.seq++
	gone := filepath.Join(c.root, trashDir, fmt.Sprintf("%d-%s-%s", c.seq, ref.Kind, ref.Key))
	if err := os.Rename(dir, gone); err != nil {
		return err
	}
	c.gc.add(gone)
	return nil
}

func isCrossDevice(err error) bool { return errors.Is(err, syscall.EXDEV) }

// copyFile copies regular file src to dst (which must not exist), keeping
// its mode.
func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, fi.Mode().Perm())
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
