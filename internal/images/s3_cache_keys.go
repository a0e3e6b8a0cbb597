package images

import (
	"bufio"
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// This file tracks which object keys the cache holds, so a node can tell
// the cluster's placement what it would not have to download: an entry is
// named by its manifest's digest, but placement knows images by what they
// are (a pause image, a template's layer), so the cache remembers the key
// each entry was last opened or written under. The map is kept in a
// journal beside the entries (keysFile: one "key<TAB>digest" line per
// change, an empty digest for a removal), so a restarted node reports what
// it caches from its first heartbeat, not only once it opens each image
// again; a torn last line (a crash mid-write) is skipped. A key another
// node overwrote (a sandbox paused again elsewhere) is reported until its
// old entry goes, so the list is a hint for placement, not a promise.

// CacheKey names image ref the way CachedKeys reports it.
func CacheKey(ref Ref) string { return imageKey(ref) }

// ContentCacheKey names content entry ref the way CachedKeys reports it.
func ContentCacheKey(ref ContentRef) string { return contentKey(ref) }

// CachedKeys returns up to limit keys (CacheKey, ContentCacheKey) whose
// image the local cache holds, most recently used first: what a restore
// here would not download.
func (o *ObjectStore) CachedKeys(limit int) []string { return o.cache.cachedKeys(limit) }

// noteKey records that the manifest at object key is entry digest, if the
// cache holds that entry (one evicted meanwhile is not worth reporting).
func (c *cache) noteKey(key, digest string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.entries[digest]; ok && c.keys[key] != digest {
		c.keys[key] = digest
		c.journalLocked(key, digest)
	}
}

// forgetKey drops key, whose object was removed: the entry may stay (a
// linked image shares it) but nothing asks for it under that key.
func (c *cache) forgetKey(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.keys[key]; ok {
		delete(c.keys, key)
		c.journalLocked(key, "")
	}
}

// forgetDigestLocked drops the keys of entry digest, evicted.
func (c *cache) forgetDigestLocked(digest string) {
	for k, d := range c.keys {
		if d == digest {
			delete(c.keys, k)
		}
	}
}

// cachedKeys is CachedKeys: the keys whose entry is here, by the entry's
// last use, newest first (ties by key, so the list is stable).
func (c *cache) cachedKeys(limit int) []string {
	if limit <= 0 {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	keys := make([]string, 0, len(c.keys))
	for k, d := range c.keys {
		if _, ok := c.entries[d]; ok {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b string) int {
		return cmp.Or(c.entries[c.keys[b]].used.Compare(c.entries[c.keys[a]].used), cmp.Compare(a, b))
	})
	return keys[:min(limit, len(keys))]
}

// keysFile is the journal of the key map, under the cache's root.
const keysFile = "keys.journal"

// journalLocked appends one change of the key map; c.mu held. A journal
// that cannot be written costs only the hint after a restart.
func (c *cache) journalLocked(key, digest string) {
	if c.root == "" || strings.ContainsAny(key+digest, "\t\n") {
		return
	}
	f, err := os.OpenFile(filepath.Join(c.root, keysFile), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return
	}
	fmt.Fprintf(f, "%s\t%s\n", key, digest)
	f.Close()
}

// loadKeys reads the journal into c.keys, keeping the keys whose entry is
// still here, and rewrites it compacted (the journal grows only between
// restarts).
func (c *cache) loadKeys() error {
	p := filepath.Join(c.root, keysFile)
	f, err := os.Open(p)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("cache keys: %w", err)
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		key, digest, ok := strings.Cut(sc.Text(), "\t")
		switch {
		case !ok || key == "":
		case digest == "":
			delete(c.keys, key)
		default:
			c.keys[key] = digest
		}
	}
	f.Close()
	var b strings.Builder
	for k, d := range c.keys {
		if _, ok := c.entries[d]; !ok {
			delete(c.keys, k)
			continue
		}
		fmt.Fprintf(&b, "%s\t%s\n", k, d)
	}
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, []byte(b.String()), 0o600); err != nil {
		return fmt.Errorf("cache keys: %w", err)
	}
	return os.Rename(tmp, p)
}
