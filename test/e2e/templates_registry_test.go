package e2e

import (
	"archive/tar"
	"bytes"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// busyboxApplets are linked to /bin/busybox in the test image.
var busyboxApplets = []string{"sh", "ls", "cat", "echo", "id", "mkdir", "chown", "nohup", "tail", "whoami", "env", "sleep", "touch", "rm", "pwd", "test", "[", "httpd"}

// tarLayer is a layer of files (name → content; a name ending in / is a
// directory) and symlinks (name → target).
func tarLayer(t *testing.T, files map[string][]byte, links map[string]string) v1.Layer {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for n, b := range files {
		if strings.HasSuffix(n, "/") { // a directory; /tmp sticky and world-writable
			mode := int64(0o755)
			if n == "tmp/" {
				mode = 0o1777
			}
			tw.WriteHeader(&tar.Header{Name: n, Mode: mode, Typeflag: tar.TypeDir})
			continue
		}
		mode := int64(0o644)
		if strings.HasPrefix(n, "bin/") {
			mode = 0o755
		}
		tw.WriteHeader(&tar.Header{Name: n, Mode: mode, Size: int64(len(b)), Typeflag: tar.TypeReg})
		tw.Write(b)
	}
	for n, target := range links {
		tw.WriteHeader(&tar.Header{Name: n, Linkname: target, Mode: 0o777, Typeflag: tar.TypeSymlink})
	}
	tw.Close()
	data := buf.Bytes()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil })
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// busyboxLayer is the static busybox with its applets, /etc/passwd and
// /etc/group (root only: no user `user`), and the directories a sandbox
// needs; extra files join it.
func busyboxLayer(t *testing.T, extra map[string][]byte) v1.Layer {
	t.Helper()
	bb, err := os.ReadFile("/bin/busybox")
	if err != nil {
		t.Fatalf("e2e: static busybox (apt-get install busybox-static): %v", err)
	}
	links := map[string]string{}
	for _, a := range busyboxApplets {
		links["bin/"+a] = "busybox"
	}
	files := map[string][]byte{
		"bin/busybox": bb, "etc/passwd": []byte("root:x:0:0:root:/root:/bin/sh\n"),
		"etc/group": []byte("root:x:0:\n"), "tmp/": nil, "root/.keep": nil, "proc/.keep": nil, "dev/.keep": nil,
	}
	for n, b := range extra {
		files[n] = b
	}
	return tarLayer(t, files, links)
}

// pushImage pushes an image of layers with config cfg to host as repo.
func pushImage(t *testing.T, host, repo string, cfg v1.Config, layers []v1.Layer, opts ...remote.Option) {
	t.Helper()
	img, err := mutate.AppendLayers(empty.Image, layers...)
	if err != nil {
		t.Fatal(err)
	}
	if img, err = mutate.Config(img, cfg); err != nil {
		t.Fatal(err)
	}
	ref, err := name.ParseReference(host+"/"+repo, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img, opts...); err != nil {
		t.Fatalf("push %s: %v", ref, err)
	}
}

// pushBusybox pushes a static busybox image with no bash and no user
// `user` to host as fbx/busybox:1: two layers, the second whiting out a
// file of the first; its Cmd is only a shell (no start command).
func pushBusybox(t *testing.T, host string, opts ...remote.Option) {
	t.Helper()
	l1 := busyboxLayer(t, map[string][]byte{"etc/gone": []byte("whited out\n")})
	l2 := tarLayer(t, map[string][]byte{"etc/.wh.gone": nil, "etc/motd": []byte("layer two\n")}, nil)
	cfg := v1.Config{Env: []string{"PATH=/bin", "IMAGE_ENV=from-config"}, Cmd: []string{"sh"}}
	pushImage(t, host, "fbx/busybox:1", cfg, []v1.Layer{l1, l2}, opts...)
}

// pushHTTPD pushes fbx/httpd:1, busybox whose Entrypoint and Cmd serve
// /www on port 8080: a build that names no start command starts that.
func pushHTTPD(t *testing.T, host string) {
	t.Helper()
	l := busyboxLayer(t, map[string][]byte{"www/index.html": []byte("served by the image's entrypoint\n")})
	cfg := v1.Config{Env: []string{"PATH=/bin"}, Entrypoint: []string{"httpd", "-f"}, Cmd: []string{"-p", "8080", "-h", "/www"}}
	pushImage(t, host, "fbx/httpd:1", cfg, []v1.Layer{l})
}

// TestTemplateRegistry builds templates from images in a registry the
// test starts on loopback, reached as docker.io/... through
// --registry-mirror: with the unmodified npm SDK (sdk: a busybox image,
// js/templates_registry.mjs; debian: Debian images the test builds,
// js/templates_debian.mjs), with the CLI (cli), and with bad input
// (errors); then the daemon is killed mid-build (killed; last).
func TestTemplateRegistry(t *testing.T) {
	dir := jsDir(t)
	reg := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(reg.Close)
	host := strings.TrimPrefix(reg.URL, "http://")
	pushBusybox(t, host)
	pushHTTPD(t, host)
	authHost := startAuthRegistry(t, "fbx", "s3cret")
	pushBusybox(t, authHost, remote.WithAuth(&authn.Basic{Username: "fbx", Password: "s3cret"}))
	d := startDaemon(t, "--registry-mirror", "docker.io="+reg.URL, "--template-ready-timeout", "5s")
	env := append(clientEnv(d), "FBX_IMAGE=docker.io/fbx/busybox:1",
		"FBX_AUTH_IMAGE="+authHost+"/fbx/busybox:1", "FBX_AUTH_USER=fbx", "FBX_AUTH_PASS=s3cret",
		"FBX_BUILDS_DIR="+filepath.Join(d.DataDir, "builds"))
	t.Run("sdk", func(t *testing.T) {
		runNode(t, dir, env, "--test", "--test-concurrency=1", "--test-reporter=spec", filepath.Join(dir, "templates_registry.mjs"))
	})
	t.Run("debian", func(t *testing.T) {
		pushDebianImages(t, host, loadDebianImages(t))
		runNode(t, dir, append(env, "FBX_DEBIAN_IMAGE=docker.io/fbx/debian:bookworm"),
			"--test", "--test-concurrency=1", "--test-reporter=spec", filepath.Join(dir, "templates_debian.mjs"))
	})
	t.Run("cli", func(t *testing.T) { checkTemplateCLI(t, d) })
	t.Run("errors", func(t *testing.T) { checkTemplateErrors(t, d) })
	if ids := d.SandboxIDs(); len(ids) > 0 {
		t.Errorf("e2e: left sandboxes behind: %v", ids)
		d.KillAll()
	}
	t.Run("killed", func(t *testing.T) { checkBuildKilled(t, d) })
}
