package ocitest

import (
	"context"
	"fmt"
	"os"
	"os/exec"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// PushDir pushes directory dir (a root filesystem) as a one-layer image
// to ref on a plain-HTTP registry, and returns the layer's compressed
// size.
func PushDir(ctx context.Context, ref, dir string) (int64, error) {
	f, err := os.CreateTemp("", "ocitest-layer-*.tar")
	if err != nil {
		return 0, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	if err := writeTar(f, dir); err != nil {
		return 0, fmt.Errorf("tar %s: %w", dir, err)
	}
	layer, err := tarball.LayerFromFile(f.Name())
	if err != nil {
		return 0, err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return 0, err
	}
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		return 0, err
	}
	if err := remote.Write(r, img, remote.WithContext(ctx)); err != nil {
		return 0, fmt.Errorf("push %s: %w", ref, err)
	}
	return layer.Size()
}

// writeTar writes dir's tree as a tar to f, as GNU tar does it (numeric
// owners, hard links, extended attributes).
func writeTar(f *os.File, dir string) error {
	out, err := exec.Command("tar", "--numeric-owner", "--xattrs", "-C", dir, "-cf", f.Name(), ".").CombinedOutput()
	if err != nil {
		return fmt.Errorf("%v: %s", err, out)
	}
	return nil
}
