package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/forkbox/forkbox/internal/oci"
	"github.com/forkbox/forkbox/internal/oci/ocitest"
)

// pullUnpack pushes the base template's rootfs as a one-layer image (GNU
// tar, gzip'd by the push) and pulls and unpacks it with internal/oci
// into an empty cache c.pulls times; MiB/s counts the uncompressed layer.
func pullUnpack(ctx context.Context, c config, reg *httptest.Server, r *results) error {
	tmp, err := os.MkdirTemp("", "forkbox-templatesbench-pull-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	layerTar := filepath.Join(tmp, "layer.tar")
	root := filepath.Join(c.daemon.TemplateDir, "base", "rootfs")
	if out, err := exec.CommandContext(ctx, "tar", "--numeric-owner", "--xattrs", "--xattrs-include=*", "-C", root, "-cf", layerTar, ".").CombinedOutput(); err != nil {
		return fmt.Errorf("tar %s: %v: %s", root, err, strings.TrimSpace(string(out)))
	}
	fi, err := os.Stat(layerTar)
	if err != nil {
		return err
	}
	r.pullUnpacked = float64(fi.Size()) / (1 << 20)
	l, err := tarball.LayerFromFile(layerTar)
	if err != nil {
		return err
	}
	img, err := ocitest.NewImage(v1.Config{Env: []string{"PATH=/usr/bin:/bin"}}, l)
	if err != nil {
		return err
	}
	slog.Info("pushing the base rootfs as an image", "MiB", int(r.pullUnpacked))
	if err := ocitest.Write(ocitest.Host(reg.URL), "fbx/base:1", img); err != nil {
		return err
	}
	ref := ocitest.Host(reg.URL) + "/fbx/base:1"
	for i := 0; i < c.pulls; i++ {
		if err := pullOnce(ctx, filepath.Join(tmp, fmt.Sprint("run", i)), ref, r); err != nil {
			return err
		}
	}
	return nil
}

// pullOnce pulls ref into an empty cache under dir and unpacks it.
func pullOnce(ctx context.Context, dir, ref string, r *results) error {
	defer os.RemoveAll(dir)
	oc, err := oci.New(oci.Options{CacheDir: filepath.Join(dir, "cache")})
	if err != nil {
		return err
	}
	t0 := time.Now()
	img, err := oc.Pull(ctx, ref, oci.PullOptions{})
	if err != nil {
		return err
	}
	if _, err := oc.Unpack(ctx, img, filepath.Join(dir, "rootfs")); err != nil {
		return err
	}
	took := time.Since(t0)
	r.pullMiBs = append(r.pullMiBs, r.pullUnpacked/took.Seconds())
	r.pullMiB = append(r.pullMiB, float64(img.Size())/(1<<20))
	slog.Info("pull+unpack", "took", took.Round(time.Millisecond))
	return nil
}
