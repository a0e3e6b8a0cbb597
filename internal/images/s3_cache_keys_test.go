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

// TestCachedKeysAfterRestart: a cache opened again on the same directory
// reports the keys of the entries it still holds, without their images
// being opened again: the removed key, the key of an entry gone from disk
// and a torn last journal line are not reported.
func TestCachedKeysAfterRestart(t *testing.T) {
	root := t.TempDir()
	c, err := openCache(root, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	pause, snap, layer := CacheKey(Pause("a")), CacheKey(Snapshot("s")), ContentCacheKey(Layer("l"))
	for _, d := range []string{"d1", "d2", "d3"} {
		putEntry(t, c, d, 10)
	}
	c.noteKey(pause, "d1")
	c.noteKey(layer, "d2")
	c.noteKey(snap, "d3")
	c.forgetKey(pause)
	c.noteKey(pause, "d1") // back: the last line counts
	c.noteKey(snap, "d1")  // moved to another entry
	c.forgetKey(layer)
	if err := os.RemoveAll(filepath.Join(root, "objects", "d3")); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(root, keysFile), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(CacheKey(Pause("torn")) + "\td") // no newline, no such entry
	f.Close()
	for round := range 2 { // the second open reads the compacted journal
		c, err = openCache(root, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		got := c.cachedKeys(10)
		slices.Sort(got)
		if want := []string{pause, snap}; !slices.Equal(got, want) {
			t.Errorf("open %d: cached keys %q, want %q", round+1, got, want)
		}
	}
}
