package images_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/images"
	"github.com/forkbox/forkbox/internal/images/imagestest"
	"github.com/forkbox/forkbox/internal/images/s3test"
	"github.com/forkbox/forkbox/internal/runtime"
)

// objectStore opens a store on srv under prefix with its own cache (one
// node's view).
func objectStore(t *testing.T, srv *s3test.Server, prefix string, tune func(*images.ObjectStoreConfig)) *images.ObjectStore {
	t.Helper()
	cfg := images.ObjectStoreConfig{
		URL: srv.URL(prefix), Endpoint: srv.Endpoint, Region: srv.Region,
		AccessKey: srv.AccessKey, SecretKey: srv.SecretKey, CacheDir: t.TempDir(), CacheSize: 1 << 30,
		OpTimeout: 10 * time.Second,
	}
	if tune != nil {
		tune(&cfg)
	}
	o, err := images.OpenObjectStore(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// The SeaweedFS the tests share (each on its own prefix); the one that
// kills its server starts its own.
var sharedS3 struct {
	once sync.Once
	srv  *s3test.Server
	dir  string
	err  error
}

func shared(t *testing.T) *s3test.Server {
	t.Helper()
	sharedS3.once.Do(func() {
		bin, err := s3test.Binary()
		if err != nil {
			sharedS3.err = err
			return
		}
		if sharedS3.dir, err = os.MkdirTemp("", "s3test-"); err != nil {
			sharedS3.err = err
			return
		}
		sharedS3.srv, sharedS3.err = s3test.Launch(bin, sharedS3.dir)
	})
	if sharedS3.err != nil {
		t.Fatal(sharedS3.err)
	}
	return sharedS3.srv
}

func TestMain(m *testing.M) {
	code := m.Run()
	if sharedS3.srv != nil {
		sharedS3.srv.Stop()
	}
	if sharedS3.dir != "" {
		os.RemoveAll(sharedS3.dir)
	}
	os.Exit(code)
}

func TestObjectStoreConformance(t *testing.T) {
	srv := shared(t)
	imagestest.Run(t, func(t *testing.T) images.Store {
		return objectStore(t, srv, runtime.NewID(), nil).Images()
	})
}

func TestObjectContentConformance(t *testing.T) {
	srv := shared(t)
	imagestest.RunContent(t, func(t *testing.T) images.ContentStore {
		return objectStore(t, srv, runtime.NewID(), nil).Content()
	})
}

// writeImage creates ref with files of the given sizes (distinct bytes
// each) and returns the directory, not yet committed.
func writeImage(t *testing.T, s images.Store, ref images.Ref, seed byte, sizes ...int) string {
	t.Helper()
	dir, err := s.Create(context.Background(), ref)
	if err != nil {
		t.Fatal(err)
	}
	for i, n := range sizes {
		b := bytes.Repeat([]byte{seed, byte(i)}, n/2+1)[:n]
		if err := os.WriteFile(filepath.Join(dir, "f"+string(rune('a'+i))), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestObjectStoreCommitPoint: an upload cut short leaves no image (the
// manifest is written last), and the retry uploads only what is missing.
func TestObjectStoreCommitPoint(t *testing.T) {
	srv := shared(t)
	o := objectStore(t, srv, "cp", nil)
	s, ref := o.Images(), images.Pause(runtime.NewID())
	sizes := make([]int, 24)
	for i := range sizes {
		sizes[i] = 512 << 10
	}
	writeImage(t, s, ref, 1, sizes...)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for o.Stats().Uploaded.Load() < 3 {
			time.Sleep(time.Millisecond)
		}
		cancel()
	}()
	if err := s.Commit(ctx, ref); err == nil {
		t.Fatal("a commit whose upload was cut short succeeded")
	}
	if ids, err := s.List(context.Background(), images.KindPause); err != nil || slices.Contains(ids, ref.ID) {
		t.Fatalf("after a cut upload the image is listed: %v %v", ids, err)
	}
	if _, err := s.Open(context.Background(), ref); !errdefs.IsNotFound(err) {
		t.Fatalf("after a cut upload Open: %v, want not found", err)
	}
	up := o.Stats().Uploaded.Load()
	if err := s.Commit(context.Background(), ref); err != nil {
		t.Fatal(err)
	}
	if sk := o.Stats().Skipped.Load(); sk < 3 || o.Stats().Uploaded.Load()-up+sk != int64(len(sizes)) {
		t.Errorf("the retry skipped %d blobs and uploaded %d, want the %d already there skipped", sk, o.Stats().Uploaded.Load()-up, up)
	}
	if ids, _ := s.List(context.Background(), images.KindPause); !slices.Contains(ids, ref.ID) {
		t.Error("the retried image is not listed")
	}
}

// TestObjectStoreChecksum: a blob whose bytes changed in the store is
// refused at download, never handed out.
func TestObjectStoreChecksum(t *testing.T) {
	srv := shared(t)
	o := objectStore(t, srv, "ck", nil)
	s, ref := o.Images(), images.Snapshot(runtime.NewID())
	writeImage(t, s, ref, 2, 3<<20)
	ctx := context.Background()
	if err := s.Commit(ctx, ref); err != nil {
		t.Fatal(err)
	}
	cl := srv.Client()
	var blob string
	for obj := range cl.ListObjects(ctx, srv.Bucket, minio.ListObjectsOptions{Prefix: "ck/blobs/", Recursive: true}) {
		blob = obj.Key
	}
	bad := bytes.Repeat([]byte{9}, 3<<20)
	if _, err := cl.PutObject(ctx, srv.Bucket, blob, bytes.NewReader(bad), int64(len(bad)), minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	o.EvictCache(true)
	if dir, err := s.Open(ctx, ref); !errors.Is(err, images.ErrChecksum) {
		t.Fatalf("open of a corrupted image: %q, %v; want a checksum mismatch", dir, err)
	}
	if _, n := o.CacheUsage(); n != 0 {
		t.Errorf("the corrupted image is in the cache (%d entries)", n)
	}
}

// TestObjectStoreCache: the cache keeps to its limit, least recently
// opened first, never evicting an image opened moments ago; an evicted
// image is downloaded again on Open, intact.
func TestObjectStoreCache(t *testing.T) {
	srv := shared(t)
	ctx := context.Background()
	o := objectStore(t, srv, "cache", func(c *images.ObjectStoreConfig) { c.CacheSize = 3 << 20; c.CachePin = time.Nanosecond })
	s := o.Images()
	a, b := images.Pause(runtime.NewID()), images.Pause(runtime.NewID())
	writeImage(t, s, a, 3, 2<<20)
	if err := s.Commit(ctx, a); err != nil {
		t.Fatal(err)
	}
	writeImage(t, s, b, 4, 2<<20)
	if err := s.Commit(ctx, b); err != nil {
		t.Fatal(err)
	}
	if size, n := o.CacheUsage(); n != 1 || size > 3<<20 {
		t.Fatalf("cache holds %d images, %d bytes; want the newest only within 3 MiB", n, size)
	}
	if got := o.CachedKeys(10); !slices.Equal(got, []string{images.CacheKey(b)}) {
		t.Errorf("cached keys %q after a's eviction, want b's only", got)
	}
	down := o.Stats().Downloaded.Load()
	dir, err := s.Open(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	if o.Stats().Downloaded.Load() != down+1 {
		t.Error("an evicted image opened without a download")
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "fa")); len(got) != 2<<20 || got[0] != 3 {
		t.Errorf("the downloaded image holds %d bytes", len(got))
	}
	if got := o.CachedKeys(10); !slices.Equal(got, []string{images.CacheKey(a)}) {
		t.Errorf("cached keys %q after a's download, want a's only", got)
	}

	pinned := objectStore(t, srv, "cache", func(c *images.ObjectStoreConfig) { c.CacheSize = 1 })
	pdir, err := pinned.Images().Open(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pinned.Images().Open(ctx, b); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(pdir, "fa")); err != nil {
		t.Errorf("an image opened moments ago was evicted: %v", err)
	}
}

// TestObjectStoreUnavailable: the server killed in the middle of an
// upload fails the commit with ErrUnavailable in bounded time and nothing
// is listed; when it returns the same store works again by itself and the
// retry uploads only the blobs that did not get there.
func TestObjectStoreUnavailable(t *testing.T) {
	srv := s3test.Start(t)
	ctx := context.Background()
	o := objectStore(t, srv, "down", func(c *images.ObjectStoreConfig) { c.OpTimeout = 3 * time.Second })
	s, ref := o.Images(), images.Pause(runtime.NewID())
	sizes := make([]int, 24)
	for i := range sizes {
		sizes[i] = 512 << 10
	}
	writeImage(t, s, ref, 5, sizes...)
	go func() {
		for o.Stats().Uploaded.Load() < 3 {
			time.Sleep(time.Millisecond)
		}
		srv.Kill()
	}()
	start := time.Now()
	err := s.Commit(ctx, ref)
	if !errors.Is(err, errdefs.ErrUnavailable) {
		t.Fatalf("commit with the store killed mid-upload: %v, want unavailable", err)
	}
	if _, err := s.Open(ctx, images.Pause(runtime.NewID())); !errors.Is(err, errdefs.ErrUnavailable) {
		t.Errorf("open with the store down: %v", err)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("failing took %v", d)
	}
	srv.Restart()
	if ids, err := s.List(ctx, images.KindPause); err != nil || len(ids) != 0 {
		t.Fatalf("after the upload was cut the store lists %v (%v)", ids, err)
	}
	up := o.Stats().Uploaded.Load()
	if err := s.Commit(ctx, ref); err != nil {
		t.Fatalf("commit after the store came back: %v", err)
	}
	if sk := o.Stats().Skipped.Load(); sk < 3 || sk+o.Stats().Uploaded.Load()-up != int64(len(sizes)) {
		t.Errorf("the retry skipped %d blobs (uploaded %d before the kill)", sk, up)
	}
	if ids, _ := s.List(ctx, images.KindPause); !slices.Equal(ids, []string{ref.ID}) {
		t.Errorf("listed after recovery: %v", ids)
	}
}

// TestObjectStoreBadConfig: a bad URL or endpoint is refused with the
// reason; a store that does not answer fails the open within its timeout.
func TestObjectStoreBadConfig(t *testing.T) {
	for _, u := range []string{"http://bucket/x", "s3://", "s3://Bad_Bucket/x", "s3://ab", "s3://key:secret@bucket/x"} {
		if _, _, err := images.ParseObjectStoreURL(u); !errdefs.IsInvalidArgument(err) {
			t.Errorf("%s: %v, want invalid argument", u, err)
		}
	}
	if b, p, err := images.ParseObjectStoreURL("s3://my-bucket/a/b/"); err != nil || b != "my-bucket" || p != "a/b" {
		t.Errorf("s3://my-bucket/a/b/ = %q %q %v", b, p, err)
	}
	start := time.Now()
	_, err := images.OpenObjectStore(context.Background(), images.ObjectStoreConfig{
		URL: "s3://bucket/p", Endpoint: "http://127.0.0.1:1", AccessKey: "a", SecretKey: "b",
		CacheDir: t.TempDir(), OpTimeout: 3 * time.Second,
	})
	if !errors.Is(err, errdefs.ErrUnavailable) || time.Since(start) > 20*time.Second {
		t.Errorf("open of an unreachable store: %v after %v", err, time.Since(start))
	}
}

// TestObjectContentClusterWide: two nodes on one bucket: an entry held on
// one is never collected by the other, opens on both, and goes when the
// last holder anywhere lets go; unreferenced blobs past the grace period
// are collected, named ones stay.
func TestObjectContentClusterWide(t *testing.T) {
	srv := shared(t)
	ctx := context.Background()
	grace := func(c *images.ObjectStoreConfig) { c.BlobGrace = time.Nanosecond }
	a, b := objectStore(t, srv, "cl", grace).Content(), objectStore(t, srv, "cl", grace).Content()
	ref := images.Layer(strings.Repeat("ab", 32))
	dir, err := a.Create(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "f"), []byte("layer"), 0o644)
	ha, hb := images.Holder{Kind: images.HolderSandbox, ID: "on-a"}, images.Holder{Kind: images.HolderBuild, ID: "on-b"}
	if err := a.Commit(ctx, ref, dir, ha); err != nil {
		t.Fatal(err)
	}
	if removed, err := b.Collect(ctx); err != nil || len(removed) != 0 {
		t.Fatalf("node b collected %v (%v) while node a holds it", removed, err)
	}
	if err := b.Hold(ctx, hb, ref); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(mustOpen(t, b, ref), "f")); err != nil || string(got) != "layer" {
		t.Fatalf("node b reads %q %v", got, err)
	}
	a.Collect(ctx)
	if err := a.Release(ctx, ha); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Open(ctx, ref); err != nil {
		t.Fatalf("after node a let go, node b's holder lost the entry: %v", err)
	}
	if err := b.Release(ctx, hb); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Open(ctx, ref); !errdefs.IsNotFound(err) {
		t.Fatalf("after the last holder anywhere let go: %v, want not found", err)
	}
	if _, err := b.Collect(ctx); err != nil {
		t.Fatal(err)
	}
	n := 0
	for range srv.Client().ListObjects(ctx, srv.Bucket, minio.ListObjectsOptions{Prefix: "cl/blobs/", Recursive: true}) {
		n++
	}
	if n != 0 {
		t.Errorf("%d blobs no manifest names are left after Collect", n)
	}
}

func mustOpen(t *testing.T, s images.ContentStore, ref images.ContentRef) string {
	t.Helper()
	dir, err := s.Open(context.Background(), ref)
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestObjectContentReleasesStaleHolders: a daemon that restarts (the same
// node: its cache directory) and does not set a holder again before its
// first Collect lets that holder's references go; another node's holders
// stay whatever this one sets.
func TestObjectContentReleasesStaleHolders(t *testing.T) {
	srv := shared(t)
	ctx := context.Background()
	cacheA := t.TempDir()
	onA := func(c *images.ObjectStoreConfig) { c.CacheDir = cacheA }
	a := objectStore(t, srv, "stale", onA).Content()
	b := objectStore(t, srv, "stale", nil).Content()
	live, gone, other := images.Layer(strings.Repeat("1", 64)), images.Layer(strings.Repeat("2", 64)), images.Layer(strings.Repeat("3", 64))
	hLive, hGone := images.Holder{Kind: images.HolderSandbox, ID: "live"}, images.Holder{Kind: images.HolderSandbox, ID: "gone"}
	hOther := images.Holder{Kind: images.HolderSandbox, ID: "on-b"}
	for _, p := range []struct {
		s   images.ContentStore
		ref images.ContentRef
		h   images.Holder
	}{{a, live, hLive}, {a, gone, hGone}, {b, other, hOther}} {
		dir, err := p.s.Create(ctx, p.ref)
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, "f"), []byte(p.ref.Key), 0o644)
		if err := p.s.Commit(ctx, p.ref, dir, p.h); err != nil {
			t.Fatal(err)
		}
	}
	again := objectStore(t, srv, "stale", onA).Content() // node a restarted
	if err := again.Set(ctx, hLive, []images.ContentRef{live}); err != nil {
		t.Fatal(err)
	}
	removed, err := again.Collect(ctx)
	if err != nil || !slices.Equal(removed, []images.ContentRef{gone}) {
		t.Fatalf("collect after the restart removed %v (%v), want only %v", removed, err, gone)
	}
	refs, _ := again.References(ctx)
	want := []images.Reference{{Holder: hLive, Ref: live}, {Holder: hOther, Ref: other}}
	if !slices.Equal(refs, want) {
		t.Errorf("references after the restart: %v, want %v", refs, want)
	}
}

// TestObjectStoreStagedAcrossRestart: an image whose upload a killed
// process cut short is still staged when the store is opened again on
// the same cache, and commits then; DropStaged removes what is left, and
// staged content does not survive the reopen.
func TestObjectStoreStagedAcrossRestart(t *testing.T) {
	srv := shared(t)
	cache := t.TempDir()
	tune := func(c *images.ObjectStoreConfig) { c.CacheDir = cache }
	o := objectStore(t, srv, "staged", tune)
	kept, dropped := images.Pause(runtime.NewID()), images.Pause(runtime.NewID())
	writeImage(t, o.Images(), kept, 1, 64<<10)
	writeImage(t, o.Images(), dropped, 2, 64<<10)
	partial, err := o.Content().Create(context.Background(), images.ContentRef{Kind: images.KindLayer, Key: strings.Repeat("ab", 16)})
	if err != nil {
		t.Fatal(err)
	}

	o = objectStore(t, srv, "staged", tune) // the process died; another opens the cache
	if _, err := os.Stat(partial); !os.IsNotExist(err) {
		t.Errorf("staged content survived the reopen: %v", err)
	}
	if _, ok := images.Staged(o.Images(), kept); !ok {
		t.Fatal("the staged image is gone after the reopen")
	}
	if err := o.Images().Commit(context.Background(), kept); err != nil {
		t.Fatal(err)
	}
	if got := images.DropStaged(o.Images()); len(got) != 1 || got[0] != dropped {
		t.Errorf("DropStaged removed %v, want only %v", got, dropped)
	}
	if _, ok := images.Staged(o.Images(), dropped); ok {
		t.Error("a dropped image is still staged")
	}
	if _, err := o.Images().Open(context.Background(), kept); err != nil {
		t.Errorf("open the image committed after the reopen: %v", err)
	}
}
