package images

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"time"
)

// cache is the object-store backend's local disk: the images it
// downloaded or uploaded, by the digest of their manifest
// (root/objects/<digest>), limited in size and evicted least recently
// opened first. An entry is never evicted while in use: a Store image for
// pinFor after it was opened or written (a restore opens its files within
// that; once open, removal does not disturb it), and a content entry while
// a holder of this process holds it (a sandbox's root filesystem is read
// for the sandbox's whole life). The limit is soft: pinned entries may
// take more.
type cache struct {
	root   string
	limit  int64
	pinFor time.Duration
	keep   func(digest string) bool // content entries in use here

	mu      sync.Mutex
	entries map[string]*centry       // guarded by mu
	loading map[string]chan struct{} // downloads in flight, guarded by mu
	total   int64                    // guarded by mu
	now     func() time.Time

	// keys maps the object keys opened or written here to their entry,
	// for CachedKeys; guarded by mu (see s3_cache_keys.go).
	keys map[string]string
}

type centry struct {
	size      int64
	used      time.Time
	pinnedTil time.Time
}

func openCache(root string, limit int64) (*cache, error) {
	c := &cache{root: root, limit: limit, pinFor: 15 * time.Minute, entries: map[string]*centry{},
		loading: map[string]chan struct{}{}, keys: map[string]string{}, now: time.Now, keep: func(string) bool { return false }}
	if err := clearScratch(root); err != nil {
		return nil, err
	}
	for _, d := range []string{"objects", "tmp", "staging"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o700); err != nil {
			return nil, err
		}
	}
	ents, err := os.ReadDir(filepath.Join(root, "objects"))
	if err != nil {
		return nil, err
	}
	for _, e := range ents {
		info, err := e.Info()
		if err != nil || !e.IsDir() {
			continue
		}
		size := treeSize(filepath.Join(root, "objects", e.Name()))
		c.entries[e.Name()] = &centry{size: size, used: info.ModTime()}
		c.total += size
	}
	if err := c.loadKeys(); err != nil {
		return nil, err
	}
	return c, nil
}

// clearScratch removes what a previous process left half-made in the
// cache: downloads and staged content. Staged images stay: a pause whose
// upload the process did not finish is committed by the sandbox
// Manager's recovery, and the rest dropped then (ObjectImages.Staged,
// DropStaged).
func clearScratch(root string) error {
	if err := os.RemoveAll(filepath.Join(root, "tmp")); err != nil {
		return err
	}
	ents, _ := os.ReadDir(filepath.Join(root, "staging"))
	for _, e := range ents {
		if slices.Contains(Kinds, Kind(e.Name())) {
			continue
		}
		if err := os.RemoveAll(filepath.Join(root, "staging", e.Name())); err != nil {
			return err
		}
	}
	return nil
}

func treeSize(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}

func (c *cache) dir(digest string) string { return filepath.Join(c.root, "objects", digest) }

// tempDir is a new directory on the cache's filesystem to download or
// stage into.
func (c *cache) tempDir(sub, pattern string) (string, error) {
	d := filepath.Join(c.root, sub)
	if err := os.MkdirAll(d, 0o700); err != nil {
		return "", err
	}
	return os.MkdirTemp(d, pattern)
}

// use marks a present entry opened now (pinned for pinFor) and returns its
// directory, or false when it is not cached.
func (c *cache) useLocked(digest string) (string, bool) {
	e, ok := c.entries[digest]
	if !ok {
		return "", false
	}
	now := c.now()
	e.used, e.pinnedTil = now, now.Add(c.pinFor)
	os.Chtimes(c.dir(digest), now, now) // LRU order survives a restart
	return c.dir(digest), true
}

// get returns the directory of the entry digest, calling fill to download
// it into a fresh directory when it is not cached (one download at a time
// per entry: a second caller waits for the first).
func (c *cache) get(ctx context.Context, digest string, fill func(dir string) error) (string, bool, error) {
	for {
		c.mu.Lock()
		if d, ok := c.useLocked(digest); ok {
			c.mu.Unlock()
			return d, true, nil
		}
		wait, busy := c.loading[digest]
		if !busy {
			c.loading[digest] = make(chan struct{})
			c.mu.Unlock()
			break
		}
		c.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return "", false, ctx.Err()
		}
	}
	defer func() {
		c.mu.Lock()
		close(c.loading[digest])
		delete(c.loading, digest)
		c.mu.Unlock()
	}()
	tmp, err := c.tempDir("tmp", "get-")
	if err == nil {
		if err = os.Chmod(tmp, 0o755); err == nil {
			err = fill(tmp)
		}
	}
	if err != nil {
		os.RemoveAll(tmp)
		return "", false, err
	}
	d, err := c.put(digest, tmp)
	return d, false, err
}

// put moves local directory src into the cache as entry digest (dropping
// src when the entry is there already) and returns the entry's directory.
func (c *cache) put(digest, src string) (string, error) {
	c.mu.Lock()
	if d, ok := c.useLocked(digest); ok {
		c.mu.Unlock()
		os.RemoveAll(src)
		return d, nil
	}
	dst := c.dir(digest)
	err := os.Rename(src, dst)
	if isCrossDevice(err) {
		// A caller's directory on another filesystem: copy it in.
		if err = os.Mkdir(dst, 0o755); err == nil {
			if err = linkOrCopyTree(src, dst); err == nil {
				err = os.RemoveAll(src)
			}
		}
	}
	if err != nil {
		c.mu.Unlock()
		os.RemoveAll(dst)
		return "", fmt.Errorf("image cache: %w", err)
	}
	size := treeSize(dst)
	c.entries[digest] = &centry{size: size}
	c.total += size
	d, _ := c.useLocked(digest)
	c.evictLocked()
	c.mu.Unlock()
	return d, nil
}

// evictLocked removes the least recently used entries that are not in use
// until the cache is within its limit.
func (c *cache) evictLocked() {
	if c.total <= c.limit {
		return
	}
	var order []string
	for d := range c.entries {
		order = append(order, d)
	}
	sort.Slice(order, func(i, j int) bool { return c.entries[order[i]].used.Before(c.entries[order[j]].used) })
	now := c.now()
	for _, d := range order {
		if c.total <= c.limit {
			return
		}
		e := c.entries[d]
		if e.pinnedTil.After(now) || c.keep(d) {
			continue
		}
		c.dropLocked(d)
	}
}

// dropLocked removes entry digest: renamed away first (no one opens it
// after), then deleted; files a restore has open stay readable.
func (c *cache) dropLocked(digest string) {
	e := c.entries[digest]
	delete(c.entries, digest)
	c.total -= e.size
	c.forgetDigestLocked(digest)
	gone, err := c.tempDir("tmp", "gone-")
	if err != nil {
		os.RemoveAll(c.dir(digest))
		return
	}
	if os.Rename(c.dir(digest), filepath.Join(gone, "x")) == nil {
		go os.RemoveAll(gone)
		return
	}
	os.RemoveAll(gone)
}

// Evict drops every cached entry not in use (the cache emptied, as after a
// wiped disk), for tests and operators; it returns how many went.
func (c *cache) evictAll(force bool) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	now := c.now()
	for d, e := range c.entries {
		if !force && (e.pinnedTil.After(now) || c.keep(d)) {
			continue
		}
		c.dropLocked(d)
		n++
	}
	return n
}

// usage is the cache's size in bytes and its number of entries.
func (c *cache) usage() (int64, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total, len(c.entries)
}
