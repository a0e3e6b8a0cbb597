package images

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func key(c byte) string { return strings.Repeat(string(c), 64) }

// TestContentReleaseFreesTheDisk: on disk, an entry whose last holder let
// go is gone once the background removal is done (Flush), no .new-
// directory of the removal stays, and a second writer's directory is
// dropped (the behaviour itself is in imagestest.RunContent).
func TestContentReleaseFreesTheDisk(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	c, err := OpenContent(root)
	if err != nil {
		t.Fatal(err)
	}
	b := Holder{HolderBuild, "b1"}
	layer, img := Layer(key('a')), TemplateImage(key('b'))
	dir, _ := c.Create(ctx, layer)
	dup, _ := c.Create(ctx, layer)
	os.WriteFile(filepath.Join(dup, "big"), make([]byte, 1<<20), 0o644)
	if err := c.Commit(ctx, layer, dir, b); err != nil {
		t.Fatal(err)
	}
	if err := c.Commit(ctx, layer, dup, b); err != nil {
		t.Fatal(err)
	}
	dir, _ = c.Create(ctx, img)
	if err := c.Commit(ctx, img, dir, b); err != nil {
		t.Fatal(err)
	}
	if removed, err := c.Collect(ctx); err != nil || len(removed) != 0 {
		t.Fatalf("collect: %v %v", removed, err)
	}
	if err := c.Release(ctx, b); err != nil {
		t.Fatal(err)
	}
	c.Flush()
	for _, k := range append(ContentKinds, trashDir) {
		if ents, _ := os.ReadDir(filepath.Join(root, string(k))); len(ents) != 0 {
			t.Errorf("left in %s/: %v", k, ents)
		}
	}
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

func TestOpenContentRecovers(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	c, _ := OpenContent(root)
	ref := Layer(key('d'))
	half, _ := c.Create(ctx, ref) // a build killed mid-step
	os.WriteFile(filepath.Join(half, "partial"), nil, 0o644)
	gc := filepath.Join(root, trashDir, "1-layers-"+key('e')) // killed mid-removal
	os.MkdirAll(gc, 0o755)
	old := filepath.Join(root, "templates", key('f')+".tmp-x") // the old store's partial image
	os.MkdirAll(old, 0o755)
	side := filepath.Join(root, "templates", key('f')+".on") // the old store's side file
	os.WriteFile(side, []byte(key('d')), 0o644)
	if _, err := OpenContent(root); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{half, gc, old, side} {
		if exists(p) {
			t.Errorf("%s survived recovery", p)
		}
	}
}

func TestShareUnchanged(t *testing.T) {
	parent, tmp := t.TempDir(), t.TempDir()
	for name, body := range map[string]string{"same": "same", "sub/deep": "deep", "edited": "old", "chmodded": "x", "appended": "a"} {
		os.MkdirAll(filepath.Join(parent, filepath.Dir(name)), 0o755)
		os.WriteFile(filepath.Join(parent, name), []byte(body), 0o644)
	}
	os.Chtimes(filepath.Join(parent, "sub"), time.Unix(1e9, 0), time.Unix(1e9, 0))
	dir := filepath.Join(tmp, "layer")
	if out, err := exec.Command("cp", "-a", parent, dir).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	since := time.Now()
	time.Sleep(30 * time.Millisecond)                                // past the kernel's coarse clock tick
	os.WriteFile(filepath.Join(dir, "edited"), []byte("new"), 0o644) // same size, in place
	os.Chmod(filepath.Join(dir, "chmodded"), 0o600)
	f, _ := os.OpenFile(filepath.Join(dir, "appended"), os.O_WRONLY|os.O_APPEND, 0)
	f.WriteString("b")
	f.Close()
	os.WriteFile(filepath.Join(dir, "new"), []byte("n"), 0o644)

	sh, err := ShareUnchanged(dir, parent, since)
	if err != nil {
		t.Fatal(err)
	}
	if sh.Files != 2 || sh.Bytes != int64(len("same")+len("deep")) {
		t.Errorf("shared %+v, want the 2 unchanged files", sh)
	}
	for name, want := range map[string]bool{"same": true, "sub/deep": true, "edited": false, "chmodded": false, "appended": false} {
		a, _ := statOf(filepath.Join(dir, name))
		b, _ := statOf(filepath.Join(parent, name))
		if got := a.Ino == b.Ino; got != want {
			t.Errorf("%s shared = %v, want %v", name, got, want)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(parent, "edited")); string(b) != "old" {
		t.Errorf("the parent's file changed: %q", b)
	}
	var st syscall.Stat_t
	syscall.Stat(filepath.Join(dir, "sub"), &st)
	if st.Mtim.Sec != 1e9 {
		t.Errorf("directory mtime %d, want kept at 1e9", st.Mtim.Sec)
	}
}
