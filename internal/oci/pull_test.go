package oci

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-containerregistry/pkg/compression"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/forkbox/forkbox/internal/errdefs"
)

func newClient(t testing.TB, opts Options) *Client {
	t.Helper()
	if opts.CacheDir == "" {
		opts.CacheDir = t.TempDir()
	}
	c, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// busyboxTar is a static busybox rootfs: no libc, no bash, applets as
// symlinks, root in /etc/passwd only.
func busyboxTar(t testing.TB) []byte {
	t.Helper()
	const bb = "/bin/busybox" // Debian's busybox-static (scripts/deps.sh)
	out, err := exec.Command(bb, "--list").Output()
	if err != nil {
		t.Fatalf("%s --list: %v (install busybox-static: scripts/deps.sh)", bb, err)
	}
	root := t.TempDir()
	for _, d := range []string{"bin", "etc", "root", "tmp"} {
		if err := os.Mkdir(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(root, "tmp"), 0o1777); err != nil {
		t.Fatal(err)
	}
	body, err := os.ReadFile(bb)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "bin/busybox"), body, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, applet := range strings.Fields(string(out)) {
		if applet != "busybox" {
			if err := os.Symlink("busybox", filepath.Join(root, "bin", applet)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := os.WriteFile(filepath.Join(root, "etc/passwd"), []byte("root:x:0:0:root:/root:/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dirTar(t, root)
}

// chrootRun runs a shell command inside rootfs (as root, host kernel).
func chrootRun(t *testing.T, rootfs, shell, cmd string) string {
	t.Helper()
	c := exec.Command(shell, "-c", cmd)
	c.SysProcAttr = &syscall.SysProcAttr{Chroot: rootfs}
	c.Dir = "/"
	c.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	out, err := c.CombinedOutput()
	if err != nil {
		t.Fatalf("chroot %s %s -c %q: %v\n%s", rootfs, shell, cmd, err, out)
	}
	return strings.TrimSpace(string(out))
}

func TestPullBusyboxRunsAndCaches(t *testing.T) {
	reg := newRegistry(t, "", "")
	cfg := v1.Config{Env: []string{"PATH=/bin", "GREETING=hi"}, WorkingDir: "/root", User: "0:0",
		Entrypoint: []string{"/bin/sh", "-c"}, Cmd: []string{"echo $GREETING"}}
	ref := reg.push(t, "tools/busybox:1.35", image(t, cfg, compression.GZip, busyboxTar(t)))
	c := newClient(t, Options{})

	var seen []Progress
	img, err := c.Pull(context.Background(), ref, PullOptions{Progress: func(p Progress) { seen = append(seen, p) }})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"/bin/sh", "-c", "echo $GREETING"}; !slices.Equal(img.Config.StartCommand(), want) {
		t.Errorf("start command %q, want %q", img.Config.StartCommand(), want)
	}
	if img.Config.WorkingDir != "/root" || img.Config.User != "0:0" || !slices.Contains(img.Config.Env, "GREETING=hi") {
		t.Errorf("config %+v", img.Config)
	}
	if !strings.HasPrefix(img.Source, reg.host+"/tools/busybox@sha256:") || img.Digest == "" {
		t.Errorf("source %q digest %q", img.Source, img.Digest)
	}
	checkProgress(t, img, seen, false)

	rootfs := filepath.Join(t.TempDir(), "rootfs")
	if _, err := c.Unpack(context.Background(), img, rootfs); err != nil {
		t.Fatal(err)
	}
	if got := chrootRun(t, rootfs, "/bin/sh", "echo hello from $(id -u) in $(ls /bin | wc -l) applets"); !strings.HasPrefix(got, "hello from 0 in ") {
		t.Errorf("busybox in the unpacked rootfs said %q", got)
	}
	if _, err := os.Stat(filepath.Join(rootfs, "bin/bash")); err == nil {
		t.Error("the busybox image has bash")
	}

	// A second pull finds every layer in the store.
	gets := reg.blobGets.Load()
	seen = nil
	if _, err := c.Pull(context.Background(), ref, PullOptions{Progress: func(p Progress) { seen = append(seen, p) }}); err != nil {
		t.Fatal(err)
	}
	if reg.blobGets.Load() != gets+1 { // the config blob only
		t.Errorf("second pull fetched %d blobs, want only the config", reg.blobGets.Load()-gets)
	}
	checkProgress(t, img, seen, true)
}

// checkProgress: per layer, Done grows to Total; the totals are the layers.
func checkProgress(t *testing.T, img *Image, seen []Progress, cached bool) {
	t.Helper()
	last := map[string]Progress{}
	for _, p := range seen {
		if prev, ok := last[p.Layer]; ok && p.Done < prev.Done {
			t.Errorf("progress of %s went back: %d after %d", p.Layer, p.Done, prev.Done)
		}
		last[p.Layer] = p
	}
	if len(last) != len(img.Layers) {
		t.Fatalf("progress for %d layers, image has %d", len(last), len(img.Layers))
	}
	for i, l := range img.Layers {
		p := last[l.Digest]
		if p.Done != l.Size || p.Total != l.Size || p.Index != i || p.Cached != cached {
			t.Errorf("layer %d final progress %+v, want %d bytes, cached=%v", i, p, l.Size, cached)
		}
	}
}

// TestPullLayeredImage pulls an image whose upper layers delete, hide and
// replace what lower ones hold, and link to their files.
func TestPullLayeredImage(t *testing.T) {
	reg := newRegistry(t, "", "")
	lower := layerTar(t, dir("etc"), file("etc/os-release", "ID=test"), file("etc/old.conf", "old"),
		dir("var/cache/apt"), file("var/cache/apt/pkg.bin", "big"), file("usr/bin/tool", "v1"))
	upper := layerTar(t, file("etc/.wh.old.conf", ""), dir("var/cache/apt"), file("var/cache/apt/.wh..wh..opq", ""),
		file("var/cache/apt/fresh", "new"), hardlink("usr/bin/tool-alias", "usr/bin/tool"))
	top := layerTar(t, file("usr/bin/tool", "v2"))
	ref := reg.push(t, "layered:latest", image(t, v1.Config{}, compression.ZStd, lower, upper, top))
	c := newClient(t, Options{})
	img, err := c.Pull(context.Background(), ref, PullOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(img.Layers) != 3 {
		t.Fatalf("%d layers", len(img.Layers))
	}
	rootfs := filepath.Join(t.TempDir(), "rootfs")
	st, err := c.Unpack(context.Background(), img, rootfs)
	if err != nil {
		t.Fatal(err)
	}
	if st.Whiteouts != 2 || st.Hardlinks != 1 {
		t.Errorf("stats %+v", st)
	}
	for p, want := range map[string]string{"etc/os-release": "ID=test", "var/cache/apt/fresh": "new",
		"usr/bin/tool": "v2", "usr/bin/tool-alias": "v1"} {
		if got := readFile(t, filepath.Join(rootfs, p)); got != want {
			t.Errorf("%s = %q, want %q", p, got, want)
		}
	}
	for _, p := range []string{"etc/old.conf", "var/cache/apt/pkg.bin"} {
		if exists(filepath.Join(rootfs, p)) {
			t.Errorf("%s survived its whiteout", p)
		}
	}
}

func TestPullPicksPlatformFromIndex(t *testing.T) {
	reg := newRegistry(t, "", "")
	other := "arm64"
	if hostArch := newClient(t, Options{}).opts.Platform.Architecture; hostArch == "arm64" {
		other = "amd64"
	}
	mine := image(t, v1.Config{}, compression.GZip, layerTar(t, file("arch", "mine")))
	theirs := imageFor(t, other, v1.Config{}, compression.GZip, layerTar(t, file("arch", "theirs")))
	idx := mutate.AppendManifests(empty.Index,
		mutate.IndexAddendum{Add: theirs, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: other}}},
		mutate.IndexAddendum{Add: mine, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: newClient(t, Options{}).opts.Platform.Architecture}}},
	)
	ref := reg.pushIndex(t, "multi:1", idx)
	c := newClient(t, Options{})
	img, err := c.Pull(context.Background(), ref, PullOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rootfs := filepath.Join(t.TempDir(), "rootfs")
	if _, err := c.Unpack(context.Background(), img, rootfs); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(rootfs, "arch")); got != "mine" {
		t.Errorf("unpacked the %q image", got)
	}
	// An image for another platform only is refused, not unpacked.
	ref = reg.push(t, "foreign:1", theirs)
	if _, err := c.Pull(context.Background(), ref, PullOptions{}); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("foreign image: err = %v", err)
	}
}

func TestPullErrors(t *testing.T) {
	open := newRegistry(t, "", "")
	ref := open.push(t, "app:1", image(t, v1.Config{}, compression.GZip, layerTar(t, file("a", "b"))))
	locked := newRegistry(t, "alice", "s3cret")
	lockedRef := locked.push(t, "private/app:1", image(t, v1.Config{}, compression.GZip, layerTar(t, file("a", "b"))))
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadHost := dead.Addr().String()
	dead.Close()

	tests := []struct {
		name string
		ref  string
		auth *Auth
		want error
		msg  string
	}{
		{"unknown tag", open.host + "/app:2", nil, errdefs.ErrNotFound, "MANIFEST_UNKNOWN"},
		{"unknown repo", open.host + "/nope:1", nil, errdefs.ErrNotFound, ""},
		{"unknown digest", open.host + "/app@sha256:" + strings.Repeat("0", 64), nil, errdefs.ErrNotFound, ""},
		{"bad reference", "UPPER/Case::x", nil, errdefs.ErrInvalidArgument, "image reference"},
		{"no credentials", lockedRef, nil, errdefs.ErrUnauthenticated, "authentication required"},
		{"bad credentials", lockedRef, &Auth{Username: "alice", Password: "wrong"}, errdefs.ErrUnauthenticated, "refused the credentials"},
		{"unreachable", deadHost + "/app:1", nil, errdefs.ErrUnavailable, "connection refused"},
	}
	c := newClient(t, Options{})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.Pull(context.Background(), tc.ref, PullOptions{Auth: tc.auth})
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("err = %v, want class %v containing %q", err, tc.want, tc.msg)
			}
		})
	}
	if _, err := c.Pull(context.Background(), ref, PullOptions{}); err != nil {
		t.Errorf("good pull: %v", err)
	}
	if _, err := c.Pull(context.Background(), lockedRef, PullOptions{Auth: &Auth{Username: "alice", Password: "s3cret"}}); err != nil {
		t.Errorf("pull with credentials: %v", err)
	}
}

// TestPullVerifiesContent: a registry serving a corrupt blob fails the
// pull and stores nothing; a blob damaged in the store fails the unpack.
func TestPullVerifiesContent(t *testing.T) {
	reg := newRegistry(t, "", "")
	ref := reg.push(t, "app:1", image(t, v1.Config{}, compression.GZip, layerTar(t, file("a", strings.Repeat("x", 4096)))))
	cache := t.TempDir()
	c := newClient(t, Options{CacheDir: cache})
	reg.corrupt.Store(true)
	if _, err := c.Pull(context.Background(), ref, PullOptions{}); err == nil {
		t.Fatal("a corrupt blob was accepted")
	}
	if ents, _ := os.ReadDir(filepath.Join(cache, "blobs/sha256")); len(ents) != 0 {
		t.Errorf("the store kept %d blobs of a failed pull", len(ents))
	}
	if ents, _ := os.ReadDir(filepath.Join(cache, "blobs/tmp")); len(ents) != 0 {
		t.Errorf("the store kept %d partial downloads", len(ents))
	}
	reg.corrupt.Store(false)
	img, err := c.Pull(context.Background(), ref, PullOptions{})
	if err != nil {
		t.Fatal(err)
	}
	blob, _ := c.store.path(img.Layers[0].Digest)
	if err := os.Chmod(blob, 0o600); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(blob)
	b[len(b)-1] ^= 0xff // the gzip trailer: the tar still reads, the hash does not
	if err := os.WriteFile(blob, b, 0o600); err != nil {
		t.Fatal(err)
	}
	rootfs := filepath.Join(t.TempDir(), "rootfs")
	if _, err := c.Unpack(context.Background(), img, rootfs); err == nil {
		t.Fatal("a damaged stored blob was unpacked")
	}
	if exists(rootfs) {
		t.Error("a failed unpack left its rootfs")
	}
	if exists(blob) {
		t.Error("the damaged blob is still in the store")
	}
}

// TestBlobCacheKeepsTheRecentlyUsed: a pull's blobs stay while it is not
// released, however small the bound; once released, the least recently
// used blobs go until the rest fit, and a pull of a layer that went
// downloads it again.
func TestBlobCacheKeepsTheRecentlyUsed(t *testing.T) {
	reg := newRegistry(t, "", "")
	big := strings.Repeat("x", 64<<10)
	refA := reg.push(t, "a:1", image(t, v1.Config{}, compression.GZip, layerTar(t, file("a", big+"a"))))
	refB := reg.push(t, "b:1", image(t, v1.Config{}, compression.GZip, layerTar(t, file("b", big+"b"))))
	cache := t.TempDir()
	c := newClient(t, Options{CacheDir: cache, BlobCacheBytes: 1})
	ctx := context.Background()
	pull := func(ref string) (*Image, bool) {
		cached := true
		img, err := c.Pull(ctx, ref, PullOptions{Progress: func(p Progress) { cached = cached && p.Cached }})
		if err != nil {
			t.Fatal(err)
		}
		return img, cached
	}
	stored := func(img *Image) bool { return c.store.has(img.Layers[0].Digest) }
	a, _ := pull(refA)
	b, _ := pull(refB)
	c.trim()
	if !stored(a) || !stored(b) {
		t.Fatal("the blobs of unreleased pulls were trimmed")
	}
	if _, err := c.Unpack(ctx, a, filepath.Join(t.TempDir(), "rootfs")); err != nil {
		t.Fatal(err)
	}
	c.Release(a)
	if stored(a) || !stored(b) {
		t.Fatalf("after a's release: a stored %v, b stored %v; want only the unreleased b", stored(a), stored(b))
	}
	c.Release(b)
	c.opts.BlobCacheBytes = b.Size() // room for one: the most recently used stays
	if _, cached := pull(refA); cached {
		t.Error("a layer that was trimmed came from the cache")
	}
	c.Release(a)
	if !stored(a) || stored(b) {
		t.Errorf("with room for one blob: a stored %v, b stored %v; want the most recently used a", stored(a), stored(b))
	}
	if _, cached := pull(refA); !cached {
		t.Error("a kept layer was downloaded again")
	}
}
