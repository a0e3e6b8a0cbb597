package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/forkbox/forkbox/internal/daemon/daemontest"
	"github.com/forkbox/forkbox/internal/oci/ocitest"
	"github.com/forkbox/forkbox/internal/template"
)

// debianImageVersion names the recipe of the test's Debian images: a new
// recipe gets new cache files.
const debianImageVersion = "bookworm-minbase-1"

// debianImages are the test's Debian images, each a single-layer image of a
// root filesystem debootstrap made from the host's Debian mirror: debian
// (minbase, as Docker Hub's debian:bookworm) and python (the same plus
// Debian's python3, standing in for Docker Hub's python:3).
type debianImages struct{ debian, python v1.Image }

// loadDebianImages returns the Debian images, built once and cached as
// image tarballs under the data dir (<template dir>/../test-images): the
// debootstrap and apt run take minutes, so CI builds them on its first run
// only.
func loadDebianImages(t *testing.T) debianImages {
	t.Helper()
	dir := filepath.Join(filepath.Dir(daemontest.TemplateDir(t)), "test-images")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// One builder at a time (test processes of several checkouts share it).
	lock, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	debian := filepath.Join(dir, "debian-"+debianImageVersion+".tar")
	python := filepath.Join(dir, "python-"+debianImageVersion+".tar")
	if !exists(debian) || !exists(python) {
		buildDebianImages(t, dir, debian, python)
	}
	var imgs debianImages
	for p, img := range map[string]*v1.Image{debian: &imgs.debian, python: &imgs.python} {
		if *img, err = tarball.ImageFromPath(p, nil); err != nil {
			t.Fatalf("cached image %s: %v", p, err)
		}
	}
	return imgs
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

// buildDebianImages debootstraps Debian (minbase) from the host's mirror,
// installs python3 into a copy with its own apt, and writes both as image
// tarballs (renamed into place when complete).
func buildDebianImages(t *testing.T, dir, debianOut, pythonOut string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	work, err := os.MkdirTemp(dir, ".build-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(work)
	root := filepath.Join(work, "debian")
	mirror := template.HostMirror()
	t0 := time.Now()
	t.Logf("building the test's Debian image from %s (first run only)", mirror)
	run(t, ctx, "debootstrap", "--variant=minbase", "bookworm", root, mirror)
	run(t, ctx, "chroot", root, "apt-get", "clean")
	os.RemoveAll(filepath.Join(root, "var/lib/apt/lists"))
	os.MkdirAll(filepath.Join(root, "var/lib/apt/lists/partial"), 0o755)
	writeImage(t, root, filepath.Join(work, "debian.tar"), v1.Config{Cmd: []string{"bash"},
		Env: []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}})
	py := filepath.Join(work, "python")
	run(t, ctx, "cp", "-a", root, py)
	run(t, ctx, "chroot", py, "apt-get", "update")
	run(t, ctx, "chroot", py, "env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "install", "-y", "--no-install-recommends", "python3")
	run(t, ctx, "chroot", py, "apt-get", "clean")
	os.RemoveAll(filepath.Join(py, "var/lib/apt/lists"))
	os.MkdirAll(filepath.Join(py, "var/lib/apt/lists/partial"), 0o755)
	writeImage(t, py, filepath.Join(work, "python.tar"), v1.Config{Cmd: []string{"python3"},
		Env: []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8"}})
	for from, to := range map[string]string{"debian.tar": debianOut, "python.tar": pythonOut} {
		if err := os.Rename(filepath.Join(work, from), to); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("Debian images built in %s", time.Since(t0).Round(time.Second))
}

// writeImage writes a one-layer image of the tree at root (tarred by GNU
// tar with numeric owners and xattrs) with config cfg to out.
func writeImage(t *testing.T, root, out string, cfg v1.Config) {
	t.Helper()
	layerTar := out + ".layer"
	run(t, context.Background(), "tar", "--numeric-owner", "--xattrs", "--xattrs-include=*", "-C", root, "-cf", layerTar, ".")
	l, err := tarball.LayerFromFile(layerTar)
	if err != nil {
		t.Fatal(err)
	}
	img, err := mutate.AppendLayers(empty.Image, l)
	if err != nil {
		t.Fatal(err)
	}
	if img, err = mutate.Config(img, cfg); err != nil {
		t.Fatal(err)
	}
	ref, _ := name.ParseReference("fbx/debian:cache")
	if err := tarball.WriteToFile(out, ref, img); err != nil {
		t.Fatalf("write %s: %v", out, err)
	}
	os.Remove(layerTar)
}

func run(t *testing.T, ctx context.Context, name string, args ...string) {
	t.Helper()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		tail := string(out)
		if len(tail) > 2000 {
			tail = tail[len(tail)-2000:]
		}
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, tail)
	}
}

// pushDebianImages pushes the Debian images to the registry at host as
// fbx/debian:bookworm, and as library/debian:stable and library/python:3,
// which the SDK's fromDebianImage() and fromPythonImage() name (docker.io,
// mirrored to host).
func pushDebianImages(t *testing.T, host string, imgs debianImages) {
	t.Helper()
	t0 := time.Now()
	for repo, img := range map[string]v1.Image{
		"fbx/debian:bookworm": imgs.debian, "library/debian:stable": imgs.debian, "library/python:3": imgs.python,
	} {
		ocitest.PushImage(t, host, repo, img)
	}
	t.Logf("pushed the Debian images in %s", time.Since(t0).Round(time.Millisecond))
}
