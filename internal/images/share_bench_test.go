package images

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// BenchmarkLayerCopy measures what a build step's new layer costs on the
// base template's root filesystem (FORKBOX_ROOTFS): the full copy
// (cp -a, what every layer was) and then ShareUnchanged, which links the
// untouched files back to the parent. It reports both times and the disk
// the layer keeps of its own.
func BenchmarkLayerCopy(b *testing.B) {
	rootfs := os.Getenv("FORKBOX_ROOTFS")
	if rootfs == "" {
		b.Fatal("FORKBOX_ROOTFS is not set: point it at the base template's rootfs")
	}
	tmp := b.TempDir()
	parent := filepath.Join(tmp, "parent") // a layer: in the same filesystem as its children
	if out, err := exec.Command("cp", "-a", rootfs, parent).CombinedOutput(); err != nil {
		b.Fatalf("cp: %v %s", err, out)
	}
	var copyT, shareT time.Duration
	var own int64
	for i := 0; i < b.N; i++ {
		dir := filepath.Join(tmp, "layer")
		t0 := time.Now()
		if out, err := exec.Command("cp", "-a", parent, dir).CombinedOutput(); err != nil {
			b.Fatalf("cp: %v %s", err, out)
		}
		copyT += time.Since(t0)
		since := time.Now()
		time.Sleep(20 * time.Millisecond)
		os.WriteFile(filepath.Join(dir, "etc/motd"), []byte("a step's change\n"), 0o644)
		t1 := time.Now()
		if _, err := ShareUnchanged(dir, parent, since); err != nil {
			b.Fatal(err)
		}
		shareT += time.Since(t1)
		own = ownBytes(dir)
		os.RemoveAll(dir)
	}
	b.ReportMetric(float64(copyT.Milliseconds())/float64(b.N), "copy-ms/op")
	b.ReportMetric(float64(shareT.Milliseconds())/float64(b.N), "share-ms/op")
	b.ReportMetric(float64(own)/(1<<20), "own-MiB")
}

// ownBytes is the disk of the regular files under dir that no other path
// links to.
func ownBytes(dir string) int64 {
	var n int64
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Nlink == 1 {
				n += st.Blocks * 512
			}
		}
		return nil
	})
	return n
}
