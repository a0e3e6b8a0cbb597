package images

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"time"

	"github.com/forkbox/forkbox/internal/errdefs"
)

// ObjectStore is the object-store backend (S3-compatible: AWS S3,
// SeaweedFS, MinIO…): a bucket holding every image, content-addressed, and
// a local disk cache of them. Images() and Content() are its two stores.
type ObjectStore struct {
	objectStore
}

// objectStore is what the two stores share.
type objectStore struct {
	b     *bucket
	cache *cache
	stats TransferStats
	grace time.Duration
	// node names this daemon in the holder markers it writes: its host
	// and cache directory (one per data dir), or ObjectStoreConfig.Node.
	node string
}

// OpenObjectStore connects to the bucket of cfg.URL, making sure it
// answers within cfg.OpTimeout (a store that does not is ErrUnavailable,
// one whose bucket is missing ErrNotFound), and opens the local cache.
func OpenObjectStore(ctx context.Context, cfg ObjectStoreConfig) (*ObjectStore, error) {
	b, err := dialBucket(cfg)
	if err != nil {
		return nil, err
	}
	if err := b.check(ctx); err != nil {
		return nil, err
	}
	if cfg.CacheDir == "" {
		return nil, fmt.Errorf("object store: no cache directory: %w", errdefs.ErrInvalidArgument)
	}
	if cfg.CacheSize <= 0 {
		cfg.CacheSize = 20 << 30
	}
	c, err := openCache(cfg.CacheDir, cfg.CacheSize)
	if err != nil {
		return nil, fmt.Errorf("image cache: %w", err)
	}
	if cfg.CachePin > 0 {
		c.pinFor = cfg.CachePin
	}
	grace := cfg.BlobGrace
	if grace == 0 {
		grace = time.Hour
	}
	node := cfg.Node
	if node == "" {
		host, _ := os.Hostname()
		node = host + ":" + cfg.CacheDir
	}
	return &ObjectStore{objectStore{b: b, cache: c, grace: grace, node: node}}, nil
}

// Images is the Store of pause and snapshot images.
func (o *ObjectStore) Images() *ObjectImages { return &ObjectImages{&o.objectStore} }

// Stats counts the blobs and bytes moved so far.
func (o *ObjectStore) Stats() *TransferStats { return &o.stats }

// EvictCache empties the local cache of what is not in use (force: of
// everything), as a wiped disk would; it returns how many entries went.
func (o *ObjectStore) EvictCache(force bool) int { return o.cache.evictAll(force) }

// CacheUsage is the local cache's size in bytes and its number of images.
func (o *ObjectStore) CacheUsage() (int64, int) { return o.cache.usage() }

// commitTree uploads dir's tree and writes its manifest at key: the commit
// point. It returns the manifest's digest (the cache entry's name).
func (s *objectStore) commitTree(ctx context.Context, what, key, dir string) (string, error) {
	m, err := scanDir(dir)
	if err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	found, err := s.uploadBlobs(ctx, what, dir, m)
	if err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	data, err := json.Marshal(m)
	if err != nil {
		return "", err
	}
	if err := s.b.putSmall(ctx, key, data); err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	if err := s.confirm(ctx, dir, m, found); err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	return digestOf(data), nil
}

func digestOf(data []byte) string {
	h := sha256.Sum256(data)
	return hex.EncodeToString(h[:])
}

// openTree returns a local directory holding the image whose manifest is
// at key: from the cache, or downloaded (and verified) into it.
func (s *objectStore) openTree(ctx context.Context, what, key string) (string, error) {
	data, err := s.b.getSmall(ctx, key)
	if errdefs.IsNotFound(err) {
		return "", fmt.Errorf("%s: %w", what, errdefs.ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	m, err := parseManifest(data)
	if err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	digest := digestOf(data)
	dir, hit, err := s.cache.get(ctx, digest, func(tmp string) error {
		return s.downloadTree(ctx, what, tmp, m)
	})
	if err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	s.cache.noteKey(key, digest)
	if hit {
		s.stats.CacheHits.Add(1)
	} else {
		s.stats.CacheMisses.Add(1)
	}
	return dir, nil
}

// ObjectImages is the object store's Store: images/<kind>/<id> is an
// image's manifest; Create hands out a staging directory in the cache,
// Commit uploads it and writes the manifest last, Open downloads into the
// cache what it lacks.
type ObjectImages struct{ s *objectStore }

var _ Store = (*ObjectImages)(nil)

func imageKey(ref Ref) string { return path.Join("images", string(ref.Kind), ref.ID) }

func (o *ObjectImages) staging(ref Ref) string {
	return filepath.Join(o.s.cache.root, "staging", string(ref.Kind), ref.ID)
}

// Create implements Store.
func (o *ObjectImages) Create(ctx context.Context, ref Ref) (string, error) {
	if err := ref.Validate(); err != nil {
		return "", err
	}
	dir := o.staging(ref)
	if err := os.RemoveAll(dir); err != nil {
		return "", fmt.Errorf("image %s: %w", ref, err)
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return "", err
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		return "", fmt.Errorf("image %s: %w", ref, err)
	}
	return dir, nil
}

// Commit implements Store: the manifest is written after every blob, so
// an upload cut short leaves no image (only blobs Collect takes later).
// On failure the written directory stays, so a retry uploads only what is
// missing.
func (o *ObjectImages) Commit(ctx context.Context, ref Ref) error {
	if err := ref.Validate(); err != nil {
		return err
	}
	dir := o.staging(ref)
	if !nonEmpty(dir) {
		return fmt.Errorf("image %s: nothing was written: %w", ref, errdefs.ErrInvalidArgument)
	}
	digest, err := o.s.commitTree(ctx, "image "+ref.String(), imageKey(ref), dir)
	if err != nil {
		return err
	}
	if _, err = o.s.cache.put(digest, dir); err != nil {
		return err
	}
	o.s.cache.noteKey(imageKey(ref), digest)
	return nil
}

// Staged returns the directory of an image of ref that Create began and
// nothing committed or aborted: left by a process that died in between,
// such as in the middle of a pause's upload.
func (o *ObjectImages) Staged(ref Ref) (string, bool) {
	if ref.Validate() != nil {
		return "", false
	}
	dir := o.staging(ref)
	return dir, nonEmpty(dir)
}

// DropStaged removes every staged image (see Staged) and returns their
// refs: once recovery has committed what it keeps, the rest is scratch.
func (o *ObjectImages) DropStaged() []Ref {
	var out []Ref
	for _, k := range Kinds {
		ents, _ := os.ReadDir(filepath.Join(o.s.cache.root, "staging", string(k)))
		for _, e := range ents {
			if os.RemoveAll(filepath.Join(o.s.cache.root, "staging", string(k), e.Name())) == nil {
				out = append(out, Ref{k, e.Name()})
			}
		}
	}
	return out
}

// Abort implements Store.
func (o *ObjectImages) Abort(ctx context.Context, ref Ref) error {
	if err := ref.Validate(); err != nil {
		return err
	}
	return os.RemoveAll(o.staging(ref))
}

// Open implements Store.
func (o *ObjectImages) Open(ctx context.Context, ref Ref) (string, error) {
	if err := ref.Validate(); err != nil {
		return "", err
	}
	return o.s.openTree(ctx, "image "+ref.String(), imageKey(ref))
}

// Exists reports whether ref is committed, without downloading it (see
// images.Exists).
func (o *ObjectImages) Exists(ctx context.Context, ref Ref) (bool, error) {
	if err := ref.Validate(); err != nil {
		return false, err
	}
	return o.s.b.exists(ctx, imageKey(ref))
}

// Link implements Store: dst's manifest is src's, so the two share every
// blob and one cache entry.
func (o *ObjectImages) Link(ctx context.Context, src, dst Ref) error {
	if err := src.Validate(); err != nil {
		return err
	}
	if err := dst.Validate(); err != nil {
		return err
	}
	data, err := o.s.b.getSmall(ctx, imageKey(src))
	if err != nil {
		return fmt.Errorf("link image %s to %s: %w", src, dst, err)
	}
	if err := o.s.b.putSmall(ctx, imageKey(dst), data); err != nil {
		return fmt.Errorf("link image %s to %s: %w", src, dst, err)
	}
	o.s.cache.noteKey(imageKey(dst), digestOf(data)) // src's entry, if here
	return nil
}

// Remove implements Store. The blobs stay until Collect finds no manifest
// naming them.
func (o *ObjectImages) Remove(ctx context.Context, ref Ref) error {
	if err := ref.Validate(); err != nil {
		return err
	}
	if err := os.RemoveAll(o.staging(ref)); err != nil {
		return err
	}
	o.s.cache.forgetKey(imageKey(ref))
	return o.s.b.remove(ctx, imageKey(ref))
}

// List implements Store.
func (o *ObjectImages) List(ctx context.Context, kind Kind) ([]string, error) {
	objs, err := o.s.b.list(ctx, path.Join("images", string(kind)))
	if err != nil {
		return nil, fmt.Errorf("list images: %w", err)
	}
	var ids []string
	for _, obj := range objs {
		id := path.Base(obj.Key)
		if (Ref{kind, id}).Validate() == nil {
			ids = append(ids, id)
		}
	}
	return ids, nil
}
