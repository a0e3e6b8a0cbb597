package oci

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"github.com/forkbox/forkbox/internal/errdefs"
)

// Unpack builds img's root filesystem at dest (which must not exist or be
// empty) from the layers in the store, applying them in order. Each layer
// is verified twice on the way: the stored blob against its digest and the
// uncompressed tar against the config's diff ID. On error dest is removed,
// so a rootfs that exists is complete.
func (c *Client) Unpack(ctx context.Context, img *Image, dest string) (ApplyStats, error) {
	var total ApplyStats
	if err := os.Mkdir(dest, 0o755); err != nil {
		if !os.IsExist(err) {
			return total, fmt.Errorf("unpack %s: %w", img.Ref, err)
		}
		if ents, err := os.ReadDir(dest); err != nil || len(ents) > 0 {
			return total, fmt.Errorf("unpack %s: %s is not an empty directory: %w", img.Ref, dest, errdefs.ErrAlreadyExists)
		}
	}
	for i, l := range img.Layers {
		st, err := c.unpackLayer(ctx, l, dest)
		if err != nil && !errors.Is(err, errCorrupt) && ctx.Err() == nil {
			// A damaged blob can fail the decompressor before its hash
			// is checked; check it now so it is removed, not kept.
			if verr := c.store.verify(l.Digest); verr != nil {
				err = fmt.Errorf("%w (%w)", verr, err)
			}
		}
		if err != nil {
			_ = os.RemoveAll(dest)
			return total, fmt.Errorf("unpack %s: layer %d (%s): %w", img.Ref, i+1, l.Digest, err)
		}
		total.add(st)
	}
	return total, nil
}

func (c *Client) unpackLayer(ctx context.Context, l Layer, dest string) (ApplyStats, error) {
	blob, err := c.store.open(l.Digest)
	if err != nil {
		return ApplyStats{}, err
	}
	defer blob.Close()
	dec, closeDec, err := decompress(bufio.NewReaderSize(blob, 1<<20))
	if err != nil {
		return ApplyStats{}, err
	}
	defer closeDec()
	h := sha256.New()
	tee := io.TeeReader(dec, h)
	st, err := ApplyLayer(ctx, dest, tee, ApplyOptions{})
	if err != nil {
		return st, err
	}
	// Read what the tar reader left (end-of-archive padding) so both
	// digests cover the whole stream.
	if _, err := io.Copy(io.Discard, tee); err != nil {
		return st, fmt.Errorf("read layer: %w", err)
	}
	if got := "sha256:" + hex.EncodeToString(h.Sum(nil)); l.DiffID != "" && got != l.DiffID {
		return st, fmt.Errorf("uncompressed layer hashes to %s, the config says %s: %w", got, l.DiffID, errCorrupt)
	}
	if _, err := io.Copy(io.Discard, blob); err != nil {
		return st, err
	}
	return st, nil
}

// decompress recognises gzip and zstd by their magic numbers (media types
// are not always honest); anything else is read as a plain tar.
func decompress(r *bufio.Reader) (io.Reader, func(), error) {
	magic, _ := r.Peek(4)
	switch {
	case len(magic) >= 2 && magic[0] == 0x1f && magic[1] == 0x8b:
		zr, err := gzip.NewReader(r)
		if err != nil {
			return nil, nil, fmt.Errorf("gzip: %v: %w", err, errCorrupt)
		}
		return zr, func() { zr.Close() }, nil
	case len(magic) == 4 && magic[0] == 0x28 && magic[1] == 0xb5 && magic[2] == 0x2f && magic[3] == 0xfd:
		zr, err := zstd.NewReader(r)
		if err != nil {
			return nil, nil, fmt.Errorf("zstd: %v: %w", err, errCorrupt)
		}
		return zr, zr.Close, nil
	}
	return r, func() {}, nil
}

func (s *ApplyStats) add(o ApplyStats) {
	s.Files += o.Files
	s.Dirs += o.Dirs
	s.Symlinks += o.Symlinks
	s.Hardlinks += o.Hardlinks
	s.Whiteouts += o.Whiteouts
	s.Skipped += o.Skipped
	s.Bytes += o.Bytes
}
