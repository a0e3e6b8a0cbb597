package oci

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/compression"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"golang.org/x/sys/unix"
)

// testRegistry is go-containerregistry's in-memory registry on loopback,
// with optional basic auth, counters and corruption of blob bodies.
type testRegistry struct {
	srv        *httptest.Server
	host       string // 127.0.0.1:port
	user, pass string
	blobGets   atomic.Int64
	corrupt    atomic.Bool
}

func newRegistry(t testing.TB, user, pass string) *testRegistry {
	t.Helper()
	r := &testRegistry{user: user, pass: pass}
	inner := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if r.user != "" {
			u, p, ok := req.BasicAuth()
			if !ok || u != r.user || p != r.pass {
				w.Header().Set("WWW-Authenticate", `Basic realm="forkbox-test"`)
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusUnauthorized)
				fmt.Fprint(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`)
				return
			}
		}
		if req.Method == http.MethodGet && strings.Contains(req.URL.Path, "/blobs/") {
			r.blobGets.Add(1)
			if r.corrupt.Load() {
				w = &flipWriter{ResponseWriter: w}
			}
		}
		inner.ServeHTTP(w, req)
	}))
	t.Cleanup(r.srv.Close)
	r.host = strings.TrimPrefix(r.srv.URL, "http://")
	return r
}

// flipWriter flips the first body byte, keeping the length.
type flipWriter struct {
	http.ResponseWriter
	done bool
}

func (f *flipWriter) Write(b []byte) (int, error) {
	if !f.done && len(b) > 0 {
		f.done = true
		c := append([]byte{}, b...)
		c[0] ^= 0xff
		return f.ResponseWriter.Write(c)
	}
	return f.ResponseWriter.Write(b)
}

// push writes img to the registry as repo:tag and returns the reference.
func (r *testRegistry) push(t testing.TB, repo string, img v1.Image) string {
	t.Helper()
	ref := r.host + "/" + repo
	tag, err := name.NewTag(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(tag, img, r.remoteAuth()); err != nil {
		t.Fatalf("push %s: %v", ref, err)
	}
	return ref
}

func (r *testRegistry) pushIndex(t testing.TB, repo string, idx v1.ImageIndex) string {
	t.Helper()
	ref := r.host + "/" + repo
	tag, err := name.NewTag(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.WriteIndex(tag, idx, r.remoteAuth()); err != nil {
		t.Fatalf("push %s: %v", ref, err)
	}
	return ref
}

func (r *testRegistry) remoteAuth() remote.Option {
	if r.user == "" {
		return remote.WithAuth(authn.Anonymous)
	}
	return remote.WithAuth(&authn.Basic{Username: r.user, Password: r.pass})
}

// image assembles an image for this host's platform from layer tars.
func image(t testing.TB, cfg v1.Config, comp compression.Compression, layers ...[]byte) v1.Image {
	t.Helper()
	return imageFor(t, runtime.GOARCH, cfg, comp, layers...)
}

func imageFor(t testing.TB, arch string, cfg v1.Config, comp compression.Compression, layers ...[]byte) v1.Image {
	t.Helper()
	img, err := mutate.ConfigFile(empty.Image, &v1.ConfigFile{OS: "linux", Architecture: arch, Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range layers {
		l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
			return io.NopCloser(bytes.NewReader(b)), nil
		}, tarball.WithCompression(comp), tarball.WithCompressedCaching)
		if err != nil {
			t.Fatal(err)
		}
		if img, err = mutate.AppendLayers(img, l); err != nil {
			t.Fatal(err)
		}
	}
	return img
}

// dirTar writes the tree at root as a layer tar, the way an image builder
// does: owners, modes, times, xattrs, symlinks, hard links and device nodes.
func dirTar(t testing.TB, root string) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	inodes := map[uint64]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel == "." {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		return tarEntry(tw, p, rel, fi, inodes)
	})
	if err != nil {
		t.Fatalf("tar %s: %v", root, err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func tarEntry(tw *tar.Writer, p, rel string, fi fs.FileInfo, inodes map[uint64]string) error {
	link := ""
	if fi.Mode()&fs.ModeSymlink != 0 {
		var err error
		if link, err = os.Readlink(p); err != nil {
			return err
		}
	}
	hdr, err := tar.FileInfoHeader(fi, link)
	if err != nil {
		return err
	}
	st := fi.Sys().(*syscall.Stat_t)
	hdr.Name, hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname, hdr.Format = rel, int(st.Uid), int(st.Gid), "", "", tar.FormatPAX
	if fi.IsDir() {
		hdr.Name += "/"
	}
	if fi.Mode().IsRegular() && st.Nlink > 1 {
		if first, ok := inodes[st.Ino]; ok {
			hdr.Typeflag, hdr.Linkname, hdr.Size = tar.TypeLink, first, 0
		} else {
			inodes[st.Ino] = rel
		}
	}
	if x := xattrs(p); len(x) > 0 {
		hdr.PAXRecords = map[string]string{}
		for k, v := range x {
			hdr.PAXRecords[xattrPrefix+k] = v
		}
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	if hdr.Typeflag != tar.TypeReg {
		return nil
	}
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(tw, f)
	return err
}

// xattrs reads the extended attributes of p (not following a symlink).
func xattrs(p string) map[string]string {
	buf := make([]byte, 4096)
	n, err := unix.Llistxattr(p, buf)
	if err != nil || n == 0 {
		return nil
	}
	out := map[string]string{}
	for _, k := range strings.Split(strings.TrimRight(string(buf[:n]), "\x00"), "\x00") {
		v := make([]byte, 4096)
		if m, err := unix.Lgetxattr(p, k, v); err == nil {
			out[k] = string(v[:m])
		}
	}
	return out
}
