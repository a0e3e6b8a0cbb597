package images

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/minio/minio-go/v7"
	"golang.org/x/sync/errgroup"
)

// This file moves blobs: uploads streamed in parts (at most partSize of a
// file in memory per upload), downloads verified against the manifest's
// digest before a file is handed out, and progress in the log.

const (
	// partSize is the multipart upload's part: a file larger than this
	// goes up in parts, one part buffered at a time.
	partSize = 16 << 20
	// transfers is how many blobs move at once.
	transfers = 4
)

// TransferStats counts what the object store moved, for tests and
// metrics.
type TransferStats struct {
	Uploaded, Skipped, Downloaded atomic.Int64 // blobs
	UpBytes, DownBytes            atomic.Int64
	// Uploads and Downloads count whole images (every blob of one), and
	// UpNanos and DownNanos add up how long they took: their mean
	// latency is the ratio.
	Uploads, Downloads atomic.Int64
	UpNanos, DownNanos atomic.Int64
	// CacheHits and CacheMisses count the opens of an image that found
	// it in the local cache and those that downloaded it.
	CacheHits, CacheMisses atomic.Int64
}

// progress logs a long transfer's bytes and rate every few seconds.
type progress struct {
	done  atomic.Int64
	total int64
	stop  chan struct{}
	start time.Time
}

func (b *bucket) track(op, what string, total int64) *progress {
	p := &progress{total: total, stop: make(chan struct{}), start: time.Now()}
	go func() {
		t := time.NewTicker(5 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-p.stop:
				return
			case <-t.C:
				b.log.Info("object store: "+op, "image", what, "bytes", p.done.Load(), "total", total, "mib_per_s", p.rate())
			}
		}
	}()
	return p
}

func (p *progress) rate() string {
	s := time.Since(p.start).Seconds()
	if s <= 0 {
		return "0"
	}
	return fmt.Sprintf("%.1f", float64(p.done.Load())/s/(1<<20))
}

// end stops the ticker and logs the summary of a transfer that moved much
// or took long.
func (b *bucket) end(p *progress, op, what string, err error) {
	close(p.stop)
	if err != nil || p.done.Load() >= 32<<20 || time.Since(p.start) > 2*time.Second {
		b.log.Info("object store: "+op+" done", "image", what, "bytes", p.done.Load(),
			"seconds", fmt.Sprintf("%.1f", time.Since(p.start).Seconds()), "mib_per_s", p.rate(), "err", err)
	}
}

// countingReader hashes and counts what is read through it.
type countingReader struct {
	r io.Reader
	h hash.Hash
	p *progress
}

func (c *countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.h.Write(b[:n])
	c.p.done.Add(int64(n))
	return n, err
}

// uploadBlobs puts every blob of m that the store lacks, from dir's files.
// A blob already there is not uploaded again (a retry, a shared file); the
// times of those found returns, so Commit can make sure collection did
// not take one between the look and the manifest (see confirm).
func (s *objectStore) uploadBlobs(ctx context.Context, what, dir string, m *manifest) (found map[string]time.Time, err error) {
	first := map[string]fileEntry{}
	for _, f := range m.Files {
		if _, ok := first[f.SHA256]; f.Type == "file" && !ok {
			first[f.SHA256] = f
		}
	}
	p := s.b.track("uploading", what, m.size())
	defer func() {
		s.b.end(p, "upload", what, err)
		s.stats.Uploads.Add(1)
		s.stats.UpNanos.Add(int64(time.Since(p.start)))
	}()
	found = map[string]time.Time{}
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(transfers)
	for sum, f := range first {
		g.Go(func() error {
			info, err := s.b.stat(gctx, blobKey(sum))
			if err == nil && info.Size == f.Size {
				s.stats.Skipped.Add(1)
				p.done.Add(f.Size)
				mu.Lock()
				found[sum] = info.LastModified
				mu.Unlock()
				return nil
			}
			return s.putBlob(gctx, filepath.Join(dir, filepath.FromSlash(f.Path)), sum, f.Size, p)
		})
	}
	return found, g.Wait()
}

// putBlob uploads one file as blob sum, checking that what was read hashes
// to sum (the file did not change since it was scanned).
func (s *objectStore) putBlob(ctx context.Context, path, sum string, size int64, p *progress) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	cr := &countingReader{r: io.LimitReader(f, size), h: sha256.New(), p: p}
	// The per-part timeout is the op timeout; a whole file may take longer.
	ctx, cancel := context.WithTimeout(ctx, s.b.timeout+time.Duration(size/(1<<20))*time.Second)
	defer cancel()
	_, err = s.b.cl.PutObject(ctx, s.b.name, s.b.key(blobKey(sum)), cr, size,
		minio.PutObjectOptions{PartSize: partSize, NumThreads: 1, ContentType: "application/octet-stream"})
	if err != nil {
		return s.b.err("upload "+path, err)
	}
	if got := hex.EncodeToString(cr.h.Sum(nil)); got != sum {
		s.b.remove(context.WithoutCancel(ctx), blobKey(sum))
		return fmt.Errorf("upload %s: read %s, scanned %s (the file changed): %w", path, got, sum, ErrChecksum)
	}
	s.stats.Uploaded.Add(1)
	s.stats.UpBytes.Add(size)
	return nil
}

// confirm makes sure the blobs Commit found already there (and did not
// upload) are still there now that the manifest names them: Collect takes
// only blobs older than its grace that no manifest names, so one found
// older than that may have gone between the look and the manifest. Those
// are put back from dir.
func (s *objectStore) confirm(ctx context.Context, dir string, m *manifest, found map[string]time.Time) error {
	cutoff := time.Now().Add(-s.grace / 2)
	for _, f := range m.Files {
		at, ok := found[f.SHA256]
		if f.Type != "file" || !ok || at.After(cutoff) {
			continue
		}
		delete(found, f.SHA256)
		if ok, err := s.b.exists(ctx, blobKey(f.SHA256)); err != nil || ok {
			if err != nil {
				return err
			}
			continue
		}
		p := &progress{stop: make(chan struct{})}
		if err := s.putBlob(ctx, filepath.Join(dir, filepath.FromSlash(f.Path)), f.SHA256, f.Size, p); err != nil {
			return err
		}
	}
	return nil
}

// downloadTree materializes m into dir (which exists and is empty),
// verifying every file's digest before the tree is handed out.
func (s *objectStore) downloadTree(ctx context.Context, what, dir string, m *manifest) (err error) {
	if err := makeTree(dir, m); err != nil {
		return err
	}
	p := s.b.track("downloading", what, m.size())
	defer func() {
		s.b.end(p, "download", what, err)
		s.stats.Downloads.Add(1)
		s.stats.DownNanos.Add(int64(time.Since(p.start)))
	}()
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(transfers)
	for _, f := range m.Files {
		if f.Type != "file" {
			continue
		}
		g.Go(func() error { return s.getBlob(gctx, filepath.Join(dir, filepath.FromSlash(f.Path)), f, p) })
	}
	if err := g.Wait(); err != nil {
		return err
	}
	return settle(dir, m)
}

func (s *objectStore) getBlob(ctx context.Context, path string, f fileEntry, p *progress) error {
	ctx, cancel := context.WithTimeout(ctx, s.b.timeout+time.Duration(f.Size/(1<<20))*time.Second)
	defer cancel()
	obj, err := s.b.cl.GetObject(ctx, s.b.name, s.b.key(blobKey(f.SHA256)), minio.GetObjectOptions{})
	if err != nil {
		return s.b.err("download "+f.Path, err)
	}
	defer obj.Close()
	out, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	cr := &countingReader{r: obj, h: sha256.New(), p: p}
	n, err := io.Copy(out, cr)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return s.b.err("download "+f.Path, err)
	}
	if got := hex.EncodeToString(cr.h.Sum(nil)); got != f.SHA256 || n != f.Size {
		return fmt.Errorf("download %s: blob %s holds %d bytes hashing to %s: %w", f.Path, f.SHA256, n, got, ErrChecksum)
	}
	s.stats.Downloaded.Add(1)
	s.stats.DownBytes.Add(n)
	return nil
}
