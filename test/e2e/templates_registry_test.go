package e2e

import (
	"path/filepath"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/forkbox/forkbox/internal/oci/ocitest"
)

// pushBusybox pushes a static busybox image with no bash and no user
// `user` to host as fbx/busybox:1: two layers, the second whiting out a
// file of the first; its Cmd is only a shell (no start command).
func pushBusybox(t *testing.T, host string, opts ...remote.Option) {
	t.Helper()
	l1 := ocitest.BusyboxLayer(t, map[string][]byte{"etc/gone": []byte("whited out\n")})
	l2 := ocitest.Layer(t, map[string][]byte{"etc/.wh.gone": nil, "etc/motd": []byte("layer two\n")}, nil)
	cfg := v1.Config{Env: []string{"PATH=/bin", "IMAGE_ENV=from-config"}, Cmd: []string{"sh"}}
	ocitest.Push(t, host, "fbx/busybox:1", cfg, []v1.Layer{l1, l2}, opts...)
}

// pushHTTPD pushes fbx/httpd:1, busybox whose Entrypoint and Cmd serve
// /www on port 8080: a build that names no start command starts that.
func pushHTTPD(t *testing.T, host string) {
	t.Helper()
	l := ocitest.BusyboxLayer(t, map[string][]byte{"www/index.html": []byte("served by the image's entrypoint\n")})
	cfg := v1.Config{Env: []string{"PATH=/bin"}, Entrypoint: []string{"httpd", "-f"}, Cmd: []string{"-p", "8080", "-h", "/www"}}
	ocitest.Push(t, host, "fbx/httpd:1", cfg, []v1.Layer{l})
}

// TestTemplateRegistry builds templates from images in a registry the
// test starts on loopback, reached as docker.io/... through
// --registry-mirror: with the unmodified npm SDK (sdk: a busybox image,
// js/templates_registry.mjs; debian: Debian images the test builds,
// js/templates_debian.mjs), with the CLI (cli), and with bad input
// (errors); then the daemon is killed mid-build (killed; last).
func TestTemplateRegistry(t *testing.T) {
	dir := jsDir(t)
	regURL := ocitest.Registry(t)
	host := ocitest.Host(regURL)
	pushBusybox(t, host)
	pushHTTPD(t, host)
	authHost := startAuthRegistry(t, "fbx", "s3cret")
	pushBusybox(t, authHost, remote.WithAuth(&authn.Basic{Username: "fbx", Password: "s3cret"}))
	d := startDaemon(t, "--registry-mirror", "docker.io="+regURL, "--template-ready-timeout", "5s")
	env := append(clientEnv(d), "FBX_IMAGE=docker.io/fbx/busybox:1",
		"FBX_AUTH_IMAGE="+authHost+"/fbx/busybox:1", "FBX_AUTH_USER=fbx", "FBX_AUTH_PASS=s3cret",
		"FBX_IMAGES_DIR="+filepath.Join(d.DataDir, "images"))
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
