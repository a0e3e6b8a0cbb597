package images

import (
	"cmp"
	"slices"
)

// This file tracks which object keys the cache holds, so a node can tell
// the cluster's placement what it would not have to download: an entry is
// named by its manifest's digest, but placement knows images by what they
// are (a pause image, a template's layer), so the cache remembers the key
// each entry was last opened or written under. The map is this process's:
// after a restart the entries are on disk but their keys come back only
// as they are opened again. A key another node overwrote (a sandbox paused
// again elsewhere) is reported until its old entry goes, so the list is a
// hint for placement, not a promise.

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
	if _, ok := c.entries[digest]; ok {
		c.keys[key] = digest
	}
}

// forgetKey drops key, whose object was removed: the entry may stay (a
// linked image shares it) but nothing asks for it under that key.
func (c *cache) forgetKey(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.keys, key)
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
