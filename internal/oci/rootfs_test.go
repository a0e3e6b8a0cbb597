package oci

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/compression"
	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// debianRootfs is the base template's Debian rootfs (FORKBOX_ROOTFS, which
// `make test` sets after `make template` built it).
func debianRootfs(t testing.TB) string {
	t.Helper()
	p := os.Getenv("FORKBOX_ROOTFS")
	if p == "" {
		t.Fatal("FORKBOX_ROOTFS is not set: point it at the base template's rootfs (make test sets it; make template builds it)")
	}
	if _, err := os.Stat(filepath.Join(p, "etc/debian_version")); err != nil {
		t.Fatalf("FORKBOX_ROOTFS=%s is not a Debian rootfs: %v", p, err)
	}
	return p
}

// debianLayers is the Debian rootfs as one layer plus a layer that deletes
// (whiteout), hides (opaque directory) and hard-links some of it.
func debianLayers(t testing.TB) (base, upper []byte, hidden []string) {
	t.Helper()
	src := debianRootfs(t)
	base = dirTar(t, src)
	upper = layerTar(t, dir("usr/share/doc"), file("usr/share/doc/.wh..wh..opq", ""),
		file("usr/share/doc/README", "docs were hidden"), file("etc/.wh.hostname", ""),
		hardlink("etc/debian_version.link", "etc/debian_version"))
	return base, upper, []string{"usr/share/doc", "etc/hostname"}
}

func TestPullDebianImage(t *testing.T) {
	src := debianRootfs(t)
	base, upper, hidden := debianLayers(t)
	reg := newRegistry(t, "", "")
	cfg := v1.Config{Env: []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
		WorkingDir: "/home/user", Cmd: []string{"/bin/bash"}}
	ref := reg.push(t, "debian:bookworm", image(t, cfg, compression.ZStd, base, upper))
	c := newClient(t, Options{})
	img, err := c.Pull(context.Background(), ref, PullOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rootfs := filepath.Join(t.TempDir(), "rootfs")
	start := time.Now()
	st, err := c.Unpack(context.Background(), img, rootfs)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("unpacked %d files, %d dirs, %d symlinks, %d hard links, %.0f MiB in %v (%d skipped)",
		st.Files, st.Dirs, st.Symlinks, st.Hardlinks, float64(st.Bytes)/(1<<20), time.Since(start), st.Skipped)
	compareTrees(t, src, rootfs, hidden)
	want := readFile(t, filepath.Join(src, "etc/debian_version")) + "docs were hidden\n1"
	if got := chrootRun(t, rootfs, "/bin/bash", "cat /etc/debian_version.link; cat /usr/share/doc/README; echo; ls /usr/share/doc | wc -l"); got != strings.TrimSpace(want) {
		t.Errorf("bash in the unpacked rootfs said %q", got)
	}
}

// compareTrees checks that every node of src (but device nodes and the
// hidden paths) is in dst with the same type, mode, owner, size, times,
// link target, xattrs and content.
func compareTrees(t *testing.T, src, dst string, hidden []string) {
	t.Helper()
	n := 0
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		for _, h := range hidden {
			if rel == h || strings.HasPrefix(rel, h+"/") {
				if d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
		}
		a, err := os.Lstat(p)
		if err != nil {
			return err
		}
		if a.Mode()&(fs.ModeDevice|fs.ModeCharDevice) != 0 {
			if exists(filepath.Join(dst, rel)) {
				t.Errorf("%s: device node created", rel)
			}
			return nil
		}
		b, err := os.Lstat(filepath.Join(dst, rel))
		if err != nil {
			t.Errorf("%s: missing: %v", rel, err)
			return nil
		}
		n++
		compareNode(t, rel, p, filepath.Join(dst, rel), a, b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 1000 {
		t.Fatalf("compared only %d nodes", n)
	}
}

func compareNode(t *testing.T, rel, pa, pb string, a, b fs.FileInfo) {
	sa, sb := a.Sys().(*syscall.Stat_t), b.Sys().(*syscall.Stat_t)
	if a.Mode() != b.Mode() || sa.Uid != sb.Uid || sa.Gid != sb.Gid {
		t.Errorf("%s: mode %v uid %d gid %d, want %v %d %d", rel, b.Mode(), sb.Uid, sb.Gid, a.Mode(), sa.Uid, sa.Gid)
		return
	}
	if !a.IsDir() && !a.ModTime().Equal(b.ModTime()) {
		t.Errorf("%s: mtime %v, want %v", rel, b.ModTime(), a.ModTime())
	}
	if xa, xb := xattrs(pa), xattrs(pb); len(xa) != len(xb) {
		t.Errorf("%s: xattrs %v, want %v", rel, xb, xa)
	}
	switch {
	case a.Mode()&fs.ModeSymlink != 0:
		la, _ := os.Readlink(pa)
		if lb, _ := os.Readlink(pb); la != lb {
			t.Errorf("%s: symlink to %q, want %q", rel, lb, la)
		}
	case a.Mode().IsRegular():
		if sa.Nlink > 1 && sb.Nlink < sa.Nlink {
			t.Errorf("%s: %d links, want %d", rel, sb.Nlink, sa.Nlink)
		}
		ca, _ := os.ReadFile(pa)
		if cb, _ := os.ReadFile(pb); !bytes.Equal(ca, cb) {
			t.Errorf("%s: content differs", rel)
		}
	}
}

// BenchmarkPullUnpack pulls the Debian image from the loopback registry
// into an empty store and unpacks it; MiB/s counts the uncompressed layers.
func BenchmarkPullUnpack(b *testing.B) {
	base, upper, _ := debianLayers(b)
	reg := newRegistry(b, "", "")
	for _, comp := range []compression.Compression{compression.GZip, compression.ZStd} {
		ref := reg.push(b, "debian:"+string(comp), image(b, v1.Config{}, comp, base, upper))
		b.Run(string(comp), func(b *testing.B) {
			size := float64(len(base) + len(upper))
			var pull, unpack time.Duration
			for b.Loop() {
				b.StopTimer()
				dir := b.TempDir()
				c := newClient(b, Options{CacheDir: filepath.Join(dir, "cache")})
				b.StartTimer()
				t0 := time.Now()
				img, err := c.Pull(context.Background(), ref, PullOptions{})
				if err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				if _, err := c.Unpack(context.Background(), img, filepath.Join(dir, "rootfs")); err != nil {
					b.Fatal(err)
				}
				pull, unpack = pull+t1.Sub(t0), unpack+time.Since(t1)
				b.StopTimer()
				os.RemoveAll(dir)
				b.StartTimer()
			}
			n := float64(b.N)
			b.ReportMetric(size/(1<<20)/((pull+unpack).Seconds()/n), "MiB/s")
			b.ReportMetric(size/(1<<20)/(pull.Seconds()/n), "pull-MiB/s")
			b.ReportMetric(size/(1<<20)/(unpack.Seconds()/n), "unpack-MiB/s")
			b.ReportMetric(size/(1<<20), "MiB")
		})
	}
	// GNU tar extracting the same (uncompressed, local) tars: what the disk
	// allows at the moment, for comparison.
	b.Run("gnu-tar-baseline", func(b *testing.B) {
		dir := b.TempDir()
		tars := []string{filepath.Join(dir, "base.tar"), filepath.Join(dir, "upper.tar")}
		for i, data := range [][]byte{base, upper} {
			if err := os.WriteFile(tars[i], data, 0o600); err != nil {
				b.Fatal(err)
			}
		}
		size := float64(len(base) + len(upper))
		for b.Loop() {
			b.StopTimer()
			root := filepath.Join(dir, "rootfs")
			if err := os.Mkdir(root, 0o755); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			for _, tf := range tars {
				if out, err := exec.Command("tar", "-C", root, "-xpf", tf, "--xattrs", "--same-owner").CombinedOutput(); err != nil {
					b.Fatalf("tar: %v\n%s", err, out)
				}
			}
			b.StopTimer()
			os.RemoveAll(root)
			b.StartTimer()
		}
		b.ReportMetric(size/(1<<20)/(b.Elapsed().Seconds()/float64(b.N)), "MiB/s")
	})
}
