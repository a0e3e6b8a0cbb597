package images

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// putEntry puts an entry of size bytes into c as digest.
func putEntry(t *testing.T, c *cache, digest string, size int) {
	t.Helper()
	src, err := c.tempDir("tmp", "test-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "f"), make([]byte, size), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := c.put(digest, src); err != nil {
		t.Fatal(err)
	}
}

// TestCachedKeys: the cache reports the keys whose entry it holds, most
// recently used first, up to the limit asked; a key of an entry it does
// not hold is not recorded, a removed key and the keys of an evicted
// entry are forgotten, and a key linked to a held entry counts.
func TestCachedKeys(t *testing.T) {
	c, err := openCache(t.TempDir(), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	clock := time.Unix(1000, 0)
	c.now = func() time.Time { clock = clock.Add(time.Second); return clock }
	c.pinFor = 0
	pause, snap := CacheKey(Pause("a")), CacheKey(Snapshot("s"))
	layer, tplImage := ContentCacheKey(Layer("l")), ContentCacheKey(TemplateImage("t"))
	putEntry(t, c, "d1", 10)
	c.noteKey(pause, "d1")
	putEntry(t, c, "d2", 10)
	c.noteKey(layer, "d2")
	c.noteKey(snap, "d1")         // linked to pause's manifest
	c.noteKey(tplImage, "absent") // not here: not worth reporting
	check := func(what string, limit int, want ...string) {
		t.Helper()
		if got := c.cachedKeys(limit); !slices.Equal(got, want) {
			t.Errorf("%s: cached keys %q, want %q", what, got, want)
		}
	}
	check("after two puts", 10, layer, pause, snap)
	check("limited", 1, layer)
	check("no room", 0)
	if _, hit, err := c.get(context.Background(), "d1", nil); err != nil || !hit {
		t.Fatalf("get of a cached entry: hit %v, %v", hit, err)
	}
	check("after d1 was used", 10, pause, snap, layer)
	c.forgetKey(snap)
	check("after the snapshot's removal", 10, pause, layer)
	putEntry(t, c, "d3", 1<<20) // over the limit: d1 and d2 go
	c.noteKey(tplImage, "d3")
	check("after eviction", 10, tplImage)
	if len(c.keys) != 1 {
		t.Errorf("keys of evicted entries kept: %v", c.keys)
	}
	c.evictAll(true)
	check("after a forced eviction", 10)
}
