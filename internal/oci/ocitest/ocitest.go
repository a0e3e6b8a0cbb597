// Package ocitest makes small images for tests and benchmarks and serves
// them from an in-process registry on loopback (go-containerregistry's,
// which speaks the distribution API as Docker's registry does): layers of
// given files and links, a static busybox layer (Debian's busybox-static,
// no bash, root only) and pushes. The New… and Write functions return
// errors; the others fail the test.
package ocitest

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// NewRegistry starts a registry on loopback; Close stops it. Its URL is
// http://127.0.0.1:port (Host gives the host:port references name).
func NewRegistry() *httptest.Server {
	return httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
}

// Registry is NewRegistry for a test: it stops when the test ends.
func Registry(t testing.TB) string {
	t.Helper()
	srv := NewRegistry()
	t.Cleanup(srv.Close)
	return srv.URL
}

// Host is a registry URL's host:port, as image references name it.
func Host(url string) string { return strings.TrimPrefix(url, "http://") }

// NewLayer is a layer of files (name → content; a name ending in / is a
// directory, tmp/ sticky and world-writable; files under bin/ are
// executable) and symlinks (name → target), in name order.
func NewLayer(files map[string][]byte, links map[string]string) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, n := range sortedKeys(files) {
		h := &tar.Header{Name: n, Mode: 0o644, Size: int64(len(files[n])), Typeflag: tar.TypeReg}
		switch {
		case n == "tmp/":
			h.Mode, h.Size, h.Typeflag = 0o1777, 0, tar.TypeDir
		case strings.HasSuffix(n, "/"):
			h.Mode, h.Size, h.Typeflag = 0o755, 0, tar.TypeDir
		case strings.HasPrefix(n, "bin/"):
			h.Mode = 0o755
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		tw.Write(files[n])
	}
	for _, n := range sortedKeys(links) {
		if err := tw.WriteHeader(&tar.Header{Name: n, Linkname: links[n], Mode: 0o777, Typeflag: tar.TypeSymlink}); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil })
}

// Layer is NewLayer failing the test.
func Layer(t testing.TB, files map[string][]byte, links map[string]string) v1.Layer {
	t.Helper()
	l, err := NewLayer(files, links)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// BusyboxApplets are linked to /bin/busybox in a busybox layer. Debian's
// busybox-static has no nohup: neither does the image.
var BusyboxApplets = []string{"sh", "ls", "cat", "echo", "id", "mkdir", "chown", "tail", "whoami", "env",
	"sleep", "touch", "rm", "pwd", "test", "[", "httpd", "wget", "cp"}

// NewBusyboxLayer is the host's static busybox with its applets, an
// /etc/passwd and /etc/group of root only (no user `user`), and the
// directories a sandbox needs; extra files join it. No bash.
func NewBusyboxLayer(extra map[string][]byte) (v1.Layer, error) {
	bb, err := os.ReadFile("/bin/busybox")
	if err != nil {
		return nil, fmt.Errorf("static busybox (apt-get install busybox-static): %w", err)
	}
	links := map[string]string{}
	for _, a := range BusyboxApplets {
		links["bin/"+a] = "busybox"
	}
	files := map[string][]byte{
		"bin/busybox": bb, "etc/passwd": []byte("root:x:0:0:root:/root:/bin/sh\n"),
		"etc/group": []byte("root:x:0:\n"), "tmp/": nil, "root/.keep": nil, "proc/.keep": nil, "dev/.keep": nil,
	}
	for n, b := range extra {
		files[n] = b
	}
	return NewLayer(files, links)
}

// BusyboxLayer is NewBusyboxLayer failing the test.
func BusyboxLayer(t testing.TB, extra map[string][]byte) v1.Layer {
	t.Helper()
	l, err := NewBusyboxLayer(extra)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// NewImage is an image of layers with config cfg.
func NewImage(cfg v1.Config, layers ...v1.Layer) (v1.Image, error) {
	img, err := mutate.AppendLayers(empty.Image, layers...)
	if err != nil {
		return nil, err
	}
	return mutate.Config(img, cfg)
}

// Write pushes img to the registry at host (plain HTTP) as repo.
func Write(host, repo string, img v1.Image, opts ...remote.Option) error {
	ref, err := name.ParseReference(host+"/"+repo, name.Insecure)
	if err != nil {
		return err
	}
	if err := remote.Write(ref, img, opts...); err != nil {
		return fmt.Errorf("push %s: %w", ref, err)
	}
	return nil
}

// Push pushes an image of layers with config cfg to host as repo
// ("name:tag"), failing the test.
func Push(t testing.TB, host, repo string, cfg v1.Config, layers []v1.Layer, opts ...remote.Option) {
	t.Helper()
	img, err := NewImage(cfg, layers...)
	if err != nil {
		t.Fatal(err)
	}
	PushImage(t, host, repo, img, opts...)
}

// PushImage is Write failing the test.
func PushImage(t testing.TB, host, repo string, img v1.Image, opts ...remote.Option) {
	t.Helper()
	if err := Write(host, repo, img, opts...); err != nil {
		t.Fatal(err)
	}
}
