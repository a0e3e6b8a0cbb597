package images

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/forkbox/forkbox/internal/errdefs"
)

// This file is ObjectContent's references (markers in the bucket, see
// ObjectContent) and the collection of entries and blobs nothing needs.

// mark writes h's two markers for ref, the entry's first: it is what keeps
// the entry.
func (c *ObjectContent) mark(ctx context.Context, h Holder, ref ContentRef) error {
	if err := c.s.b.putSmall(ctx, holdMarker(ref, h), nil); err != nil {
		return err
	}
	return c.s.b.putSmall(ctx, holderMarker(h, ref), []byte(c.s.node))
}

// unmark removes h's markers for ref, the index first (a crash between
// leaves a marker that still keeps the entry, never an entry held in the
// index only).
func (c *ObjectContent) unmark(ctx context.Context, h Holder, ref ContentRef) error {
	if err := c.s.b.remove(ctx, holderMarker(h, ref)); err != nil {
		return err
	}
	return c.s.b.remove(ctx, holdMarker(ref, h))
}

// heldBy lists what h holds, from its index.
func (c *ObjectContent) heldBy(ctx context.Context, h Holder) (map[ContentRef]bool, error) {
	objs, err := c.s.b.list(ctx, path.Join("holders", holderPart(h)))
	if err != nil {
		return nil, err
	}
	out := map[ContentRef]bool{}
	for _, o := range objs {
		parts := strings.Split(o.Key, "/")
		if len(parts) == 5 {
			out[ContentRef{ContentKind(parts[3]), parts[4]}] = true
		}
	}
	return out, nil
}

// Hold implements ContentStore.
func (c *ObjectContent) Hold(ctx context.Context, h Holder, refs ...ContentRef) error {
	_, err := c.hold(ctx, h, refs)
	return err
}

// hold marks refs for h, then checks they are committed; when one is not,
// it takes back the markers h did not have before. It returns what h held
// before.
func (c *ObjectContent) hold(ctx context.Context, h Holder, refs []ContentRef) (map[ContentRef]bool, error) {
	if err := checkHolding(h, refs); err != nil {
		return nil, err
	}
	held, err := c.heldBy(ctx, h)
	if err != nil {
		return nil, err
	}
	var added, missing []ContentRef
	var errs []error
	for _, ref := range refs {
		if !held[ref] && !slices.Contains(added, ref) {
			if err := c.mark(ctx, h, ref); err != nil {
				errs = append(errs, err)
				break
			}
			added = append(added, ref)
		}
	}
	if len(errs) == 0 {
		for _, ref := range refs {
			ok, err := c.s.b.exists(ctx, contentKey(ref))
			if err != nil {
				errs = append(errs, err)
			} else if !ok {
				missing = append(missing, ref)
			}
		}
	}
	if len(missing) > 0 {
		errs = append(errs, fmt.Errorf("content %s: %w", refList(missing), errdefs.ErrNotFound))
	}
	if err := errors.Join(errs...); err != nil {
		for _, ref := range added {
			c.unmark(context.WithoutCancel(ctx), h, ref)
		}
		return nil, err
	}
	for _, ref := range refs {
		c.noteLocal(h, ref, "")
	}
	return held, nil
}

func refList(refs []ContentRef) string {
	var s []string
	for _, r := range refs {
		s = append(s, r.String())
	}
	return strings.Join(s, ", ")
}

// Set implements ContentStore.
func (c *ObjectContent) Set(ctx context.Context, h Holder, refs []ContentRef) error {
	held, err := c.hold(ctx, h, refs)
	if err != nil {
		return err
	}
	var errs []error
	for ref := range held {
		if !slices.Contains(refs, ref) {
			errs = append(errs, c.drop(ctx, h, ref))
		}
	}
	return errors.Join(errs...)
}

// Release implements ContentStore.
func (c *ObjectContent) Release(ctx context.Context, h Holder) error {
	if err := h.validate(); err != nil {
		return err
	}
	held, err := c.heldBy(ctx, h)
	if err != nil {
		return err
	}
	var errs []error
	for ref := range held {
		errs = append(errs, c.drop(ctx, h, ref))
	}
	return errors.Join(errs...)
}

// drop takes h's reference to ref away, and the entry with it when no
// holder on any node is left (once armed).
func (c *ObjectContent) drop(ctx context.Context, h Holder, ref ContentRef) error {
	if err := c.unmark(ctx, h, ref); err != nil {
		return err
	}
	c.forgetLocal(h, ref)
	c.mu.Lock()
	armed := c.armed
	c.mu.Unlock()
	if !armed {
		return nil
	}
	_, err := c.removeIfUnheld(ctx, ref)
	return err
}

// holders counts the markers that hold ref.
func (c *ObjectContent) holders(ctx context.Context, ref ContentRef) (int, error) {
	objs, err := c.s.b.list(ctx, path.Join("holds", string(ref.Kind), ref.Key))
	return len(objs), err
}

// removeIfUnheld deletes entry ref's manifest when no marker holds it,
// putting it back when a Hold on another node marked it meanwhile (see
// ObjectContent). Its blobs go at a later Collect.
func (c *ObjectContent) removeIfUnheld(ctx context.Context, ref ContentRef) (bool, error) {
	if n, err := c.holders(ctx, ref); err != nil || n > 0 {
		return false, err
	}
	data, err := c.s.b.getSmall(ctx, contentKey(ref))
	if errdefs.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if err := c.s.b.remove(ctx, contentKey(ref)); err != nil {
		return false, err
	}
	if n, err := c.holders(ctx, ref); err != nil || n > 0 {
		return false, errors.Join(err, c.s.b.putSmall(context.WithoutCancel(ctx), contentKey(ref), data))
	}
	c.s.cache.forgetKey(contentKey(ref))
	return true, nil
}

// References implements ContentStore: every node's.
func (c *ObjectContent) References(ctx context.Context) ([]Reference, error) {
	objs, err := c.s.b.list(ctx, "holders")
	if err != nil {
		return nil, err
	}
	var out []Reference
	for _, o := range objs {
		parts := strings.Split(o.Key, "/")
		if len(parts) != 5 {
			continue
		}
		out = append(out, Reference{
			Holder: Holder{Kind: HolderKind(parts[1]), ID: unescapeID(parts[2])},
			Ref:    ContentRef{ContentKind(parts[3]), parts[4]},
		})
	}
	slices.SortFunc(out, func(a, b Reference) int {
		return strings.Compare(a.Holder.String()+" "+a.Ref.String(), b.Holder.String()+" "+b.Ref.String())
	})
	return out, nil
}

// Collect implements ContentStore: the entries no holder on any node
// holds go, then the blobs no manifest names (see CollectBlobs).
func (c *ObjectContent) Collect(ctx context.Context) ([]ContentRef, error) {
	c.mu.Lock()
	first := !c.armed
	c.mu.Unlock()
	if first {
		if err := c.releaseStale(ctx); err != nil {
			return nil, err
		}
	}
	var removed []ContentRef
	for _, k := range ContentKinds {
		all, err := c.List(ctx, k)
		if err != nil {
			return removed, err
		}
		for _, ref := range all {
			gone, err := c.removeIfUnheld(ctx, ref)
			if err != nil {
				return removed, err
			}
			if gone {
				removed = append(removed, ref)
			}
		}
	}
	c.mu.Lock()
	c.armed = true
	c.mu.Unlock()
	_, err := c.s.CollectBlobs(ctx)
	return removed, err
}

// releaseStale drops the references of the holders this daemon recorded
// before it last stopped and has not set again since it opened the store:
// the first Collect comes after every owner set its holders, so those are
// gone (a sandbox killed just before a crash whose release did not get
// through). The disk store forgets them by keeping references in memory;
// here they would keep their entries forever. Another daemon's holders
// (another node) are never touched.
func (c *ObjectContent) releaseStale(ctx context.Context) error {
	objs, err := c.s.b.list(ctx, "holders")
	if err != nil {
		return err
	}
	byHolder := map[Holder][]ContentRef{}
	var first = map[Holder]string{}
	for _, o := range objs {
		parts := strings.Split(o.Key, "/")
		if len(parts) != 5 {
			continue
		}
		h := Holder{Kind: HolderKind(parts[1]), ID: unescapeID(parts[2])}
		byHolder[h] = append(byHolder[h], ContentRef{ContentKind(parts[3]), parts[4]})
		if _, ok := first[h]; !ok {
			first[h] = o.Key
		}
	}
	for h, refs := range byHolder {
		c.mu.Lock()
		live := c.touched[h]
		c.mu.Unlock()
		if live {
			continue
		}
		owner, err := c.s.b.getSmall(ctx, first[h])
		if errdefs.IsNotFound(err) || err == nil && string(owner) != c.s.node {
			continue
		}
		if err != nil {
			return err
		}
		for _, ref := range refs {
			if err := c.unmark(ctx, h, ref); err != nil {
				return err
			}
		}
		c.s.b.log.Info("object store: released the references of a holder gone while this daemon was down", "holder", h.String(), "refs", len(refs))
	}
	return nil
}

// CollectBlobs removes the blobs no manifest names that are older than the
// grace period, and returns how many went. A blob uploaded for a manifest
// not yet written (a commit in progress on any node) is younger than that;
// a commit that found an older blob there and used it makes sure it is
// still there after its manifest names it (confirm).
func (s *objectStore) CollectBlobs(ctx context.Context) (int, error) {
	blobs, err := s.b.list(ctx, "blobs/sha256")
	if err != nil {
		return 0, err
	}
	named := map[string]bool{}
	for _, dir := range []string{"images", "content"} {
		objs, err := s.b.list(ctx, dir)
		if err != nil {
			return 0, err
		}
		for _, o := range objs {
			data, err := s.b.getSmall(ctx, o.Key)
			if errdefs.IsNotFound(err) {
				continue
			}
			if err != nil {
				return 0, err
			}
			m, err := parseManifest(data)
			if err != nil {
				return 0, fmt.Errorf("%s: %w", o.Key, err)
			}
			for _, sum := range m.blobs() {
				named[sum] = true
			}
		}
	}
	cutoff := time.Now().Add(-s.grace)
	n := 0
	for _, b := range blobs {
		if sum := path.Base(b.Key); !named[sum] && b.LastModified.Before(cutoff) {
			if err := s.b.remove(ctx, b.Key); err != nil {
				return n, err
			}
			n++
		}
	}
	return n, nil
}
