package e2e

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/forkbox/forkbox/internal/oci/ocitest"
)

// TestTemplateStorage runs js/templates_storage.mjs (the unmodified npm
// SDK) against a daemon building from a busybox image in a loopback
// registry: content a deleted template's sandboxes and snapshots use stays
// until the last of them goes, and then leaves the disk within seconds.
// Once every template is deleted the image store holds nothing but the
// built-in templates' images, and with --oci-blob-cache 0 no pulled blob
// outlives its unpack.
func TestTemplateStorage(t *testing.T) {
	dir := jsDir(t)
	reg := ocitest.Registry(t)
	pushBusybox(t, ocitest.Host(reg))
	d := startDaemon(t, "--registry-mirror", "docker.io="+reg, "--oci-blob-cache", "0")
	images := filepath.Join(d.DataDir, "images")
	env := append(clientEnv(d), "FBX_IMAGE=docker.io/fbx/busybox:1", "FBX_IMAGES_DIR="+images)
	runNode(t, dir, env, "--test", "--test-concurrency=1", "--test-reporter=spec", filepath.Join(dir, "templates_storage.mjs"))
	if layers := entryNames(t, filepath.Join(images, "layers")); len(layers) > 0 {
		t.Errorf("layers left with no template, sandbox or snapshot: %v", layers)
	}
	if imgs := entryNames(t, filepath.Join(images, "templates")); len(imgs) != 2 {
		t.Errorf("template images %v, want only the two built-in templates'", imgs)
	}
	if blobs := entryNames(t, filepath.Join(d.DataDir, "oci", "blobs", "sha256")); len(blobs) > 0 {
		t.Errorf("with --oci-blob-cache 0, blobs outlived their unpack: %v", blobs)
	}
}

// entryNames lists a directory's entries.
func entryNames(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}
