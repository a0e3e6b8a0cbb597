package oci

import (
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"
)

// The blob store is a cache bounded by Options.BlobCacheBytes: a pulled
// image's layers are kept while the pull and the unpack after it use them
// (pinned from Pull to Release), then the least recently used blobs go
// until the rest fit.

// pins counts, per blob digest, the pulls that use it.
type pins struct {
	mu sync.Mutex
	n  map[string]int // guarded by mu
}

func (p *pins) add(img *Image) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.n == nil {
		p.n = map[string]int{}
	}
	for _, l := range img.Layers {
		p.n[l.Digest]++
	}
}

func (p *pins) drop(img *Image) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, l := range img.Layers {
		if p.n[l.Digest]--; p.n[l.Digest] <= 0 {
			delete(p.n, l.Digest)
		}
	}
}

// Release ends a pull's use of img's blobs (after its unpack): they become
// the most recently used, and the cache is trimmed to its bound.
func (c *Client) Release(img *Image) {
	now := time.Now()
	for _, l := range img.Layers {
		if p, err := c.store.path(l.Digest); err == nil {
			os.Chtimes(p, now, now)
		}
	}
	c.inUse.drop(img)
	c.trim()
}

// trim removes the least recently used blobs no pull uses until the rest
// fit in Options.BlobCacheBytes.
func (c *Client) trim() {
	if c.opts.BlobCacheBytes < 0 {
		return
	}
	type blob struct {
		digest string
		size   int64
		used   time.Time
	}
	dir := filepath.Join(c.store.dir, "sha256")
	ents, _ := os.ReadDir(dir)
	var blobs []blob
	var total int64
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		blobs = append(blobs, blob{"sha256:" + e.Name(), fi.Size(), fi.ModTime()})
		total += fi.Size()
	}
	slices.SortFunc(blobs, func(a, b blob) int { return a.used.Compare(b.used) })
	// A pull pins its blobs before it looks for them: holding the pins
	// while removing, a blob a pull found cannot go under it.
	c.inUse.mu.Lock()
	defer c.inUse.mu.Unlock()
	for _, b := range blobs {
		if total <= c.opts.BlobCacheBytes {
			return
		}
		if c.inUse.n[b.digest] > 0 {
			continue
		}
		if p, err := c.store.path(b.digest); err == nil && os.Remove(p) == nil {
			total -= b.size
		}
	}
}
