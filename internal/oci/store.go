package oci

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/forkbox/forkbox/internal/errdefs"
)

// blobStore keeps blobs by digest under dir/blobs/sha256/<hex>. A blob is
// written to dir/blobs/tmp, verified against its digest and size, synced and
// only then renamed into place, so a blob present under its name is whole
// and correct, however a download ended.
type blobStore struct {
	dir string // .../blobs
}

// staleTemp is how old an unfinished download must be before a new store
// removes it (younger ones may belong to a pull in flight).
const staleTemp = time.Hour

func newBlobStore(cacheDir string, owned bool) (*blobStore, error) {
	s := &blobStore{dir: filepath.Join(cacheDir, "blobs")}
	for _, d := range []string{s.dir, filepath.Join(s.dir, "sha256"), filepath.Join(s.dir, "tmp")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("oci: blob store: %w", err)
		}
	}
	ents, _ := os.ReadDir(filepath.Join(s.dir, "tmp"))
	for _, e := range ents {
		if fi, err := e.Info(); err == nil && (owned || time.Since(fi.ModTime()) > staleTemp) {
			_ = os.Remove(filepath.Join(s.dir, "tmp", e.Name()))
		}
	}
	return s, nil
}

// path is where the blob of digest lives; it refuses anything but sha256.
func (s *blobStore) path(digest string) (string, error) {
	hx, ok := strings.CutPrefix(digest, "sha256:")
	if !ok || len(hx) != sha256.Size*2 {
		return "", fmt.Errorf("digest %q: only sha256 is supported: %w", digest, errdefs.ErrInvalidArgument)
	}
	if _, err := hex.DecodeString(hx); err != nil {
		return "", fmt.Errorf("digest %q: %w", digest, errdefs.ErrInvalidArgument)
	}
	return filepath.Join(s.dir, "sha256", hx), nil
}

func (s *blobStore) has(digest string) bool {
	p, err := s.path(digest)
	if err != nil {
		return false
	}
	_, err = os.Stat(p)
	return err == nil
}

// put stores what r yields under digest, refusing it unless it has exactly
// size bytes (size < 0: any) hashing to digest.
func (s *blobStore) put(ctx context.Context, digest string, size int64, r io.Reader) error {
	final, err := s.path(digest)
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Join(s.dir, "tmp"), "blob-")
	if err != nil {
		return fmt.Errorf("oci: blob store: %w", err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, h), ctxReader{ctx, r})
	if err != nil {
		return fmt.Errorf("download %s: %w", digest, err)
	}
	if size >= 0 && n != size {
		return fmt.Errorf("blob %s: got %d bytes, want %d: %w", digest, n, size, errCorrupt)
	}
	if got := "sha256:" + hex.EncodeToString(h.Sum(nil)); got != digest {
		return fmt.Errorf("blob %s: content hashes to %s: %w", digest, got, errCorrupt)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("oci: blob store: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("oci: blob store: %w", err)
	}
	if err := os.Chmod(f.Name(), 0o400); err != nil {
		return fmt.Errorf("oci: blob store: %w", err)
	}
	if err := os.Rename(f.Name(), final); err != nil {
		return fmt.Errorf("oci: blob store: %w", err)
	}
	return nil
}

// open returns the blob of digest; reading it to EOF verifies it again, so
// a blob damaged on disk is noticed (and removed) rather than unpacked.
func (s *blobStore) open(digest string) (io.ReadCloser, error) {
	p, err := s.path(digest)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(p)
	if os.IsNotExist(err) {
		return nil, fmt.Errorf("blob %s is not in the store (pull the image first): %w", digest, errdefs.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("oci: blob store: %w", err)
	}
	return &verifyingReader{f: f, h: sha256.New(), want: digest, path: p}, nil
}

// verify hashes the stored blob of digest, removing it if it is damaged.
func (s *blobStore) verify(digest string) error {
	rc, err := s.open(digest)
	if err != nil {
		return err
	}
	defer rc.Close()
	_, err = io.Copy(io.Discard, rc)
	return err
}

// verifyingReader hashes a stored blob as it is read and fails the read
// that reaches EOF if the hash differs.
type verifyingReader struct {
	f    *os.File
	h    hash.Hash
	want string
	path string
}

func (v *verifyingReader) Read(b []byte) (int, error) {
	n, err := v.f.Read(b)
	v.h.Write(b[:n])
	if err == io.EOF {
		if got := "sha256:" + hex.EncodeToString(v.h.Sum(nil)); got != v.want {
			_ = os.Remove(v.path)
			return n, fmt.Errorf("stored blob %s is damaged (hashes to %s); removed it, pull again: %w", v.want, got, errCorrupt)
		}
	}
	return n, err
}

func (v *verifyingReader) Close() error { return v.f.Close() }

// ctxReader stops a copy when ctx ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(b []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(b)
}
