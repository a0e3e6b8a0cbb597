package oci

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// cleanStaleRootfs removes scratch unpacks a crash left behind.
func cleanStaleRootfs(cacheDir string) {
	tmp := filepath.Join(cacheDir, "rootfs", "tmp")
	ents, _ := os.ReadDir(tmp)
	for _, e := range ents {
		if fi, err := e.Info(); err == nil && time.Since(fi.ModTime()) > staleTemp {
			_ = os.RemoveAll(filepath.Join(tmp, e.Name()))
		}
	}
}

// Rootfs returns the unpacked root filesystem of img, unpacking it once:
// it lives under the cache directory at rootfs/<manifest hex>, keyed by
// the manifest digest (so by every layer), unpacked into a scratch
// directory and renamed into place only when complete. Callers must treat
// it as read-only — every sandbox and build of the image shares it.
func (c *Client) Rootfs(ctx context.Context, img *Image) (string, error) {
	if _, err := c.store.path(img.Digest); err != nil {
		return "", fmt.Errorf("rootfs of %s: manifest digest: %w", img.Ref, err)
	}
	hx := strings.TrimPrefix(img.Digest, "sha256:")
	dir := filepath.Join(c.opts.CacheDir, "rootfs")
	final := filepath.Join(dir, hx)
	if fi, err := os.Stat(final); err == nil && fi.IsDir() {
		return final, nil
	}
	if err := os.MkdirAll(filepath.Join(dir, "tmp"), 0o700); err != nil {
		return "", fmt.Errorf("rootfs of %s: %w", img.Ref, err)
	}
	scratch, err := os.MkdirTemp(filepath.Join(dir, "tmp"), hx[:12]+"-")
	if err != nil {
		return "", fmt.Errorf("rootfs of %s: %w", img.Ref, err)
	}
	defer os.RemoveAll(scratch)
	if _, err := c.Unpack(ctx, img, filepath.Join(scratch, "rootfs")); err != nil {
		return "", err
	}
	// A concurrent unpack of the same image may have won: keep its copy.
	if err := os.Rename(filepath.Join(scratch, "rootfs"), final); err != nil {
		if fi, serr := os.Stat(final); serr != nil || !fi.IsDir() {
			return "", fmt.Errorf("rootfs of %s: %w", img.Ref, err)
		}
	}
	return final, nil
}
