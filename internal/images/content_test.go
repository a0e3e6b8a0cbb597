package images

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

func key(c byte) string { return strings.Repeat(string(c), 64) }

func TestContentCollectKeepsReferenced(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	c, err := OpenContent(root)
	if err != nil {
		t.Fatal(err)
	}
	shared, onlyA, img := ContentRef{KindLayer, key('a')}, ContentRef{KindLayer, key('b')}, ContentRef{KindTemplateImage, key('c')}
	for _, ref := range []ContentRef{shared, onlyA, img} {
		dir, err := c.Create(ref)
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, "f"), []byte(ref.Key), 0o644)
		if err := c.Commit(ref, dir); err != nil {
			t.Fatal(err)
		}
	}
	// A second writer of the same content loses quietly.
	dup, _ := c.Create(shared)
	if err := c.Commit(shared, dup); err != nil || exists(dup) {
		t.Fatalf("second commit of one ref: %v (left %s: %v)", err, dup, exists(dup))
	}
	refs := []Reference{
		{HolderTemplate, "A", shared}, {HolderTemplate, "A", onlyA}, {HolderTemplate, "A", img},
		{HolderTemplate, "B", shared},
	}
	if n := Counts(refs)[shared]; n != 2 {
		t.Errorf("count of the shared layer %d, want 2", n)
	}
	// Template A deleted: its own layer and image go, the shared one stays.
	removed, err := c.Collect(ctx, refs[3:])
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(removed, []ContentRef{onlyA, img}) || !c.Has(shared) || c.Has(onlyA) || c.Has(img) {
		t.Fatalf("collect removed %v; shared kept %v", removed, c.Has(shared))
	}
	// A sandbox still on the shared layer holds it after B goes too.
	if removed, _ := c.Collect(ctx, []Reference{{HolderSandbox, "s1", shared}}); len(removed) != 0 {
		t.Fatalf("collect removed %v while a sandbox uses it", removed)
	}
	if removed, _ := c.Collect(ctx, nil); len(removed) != 1 || c.Has(shared) {
		t.Fatalf("collect of the unreferenced shared layer: %v", removed)
	}
	if ents, _ := os.ReadDir(filepath.Join(root, "layers")); len(ents) != 0 {
		t.Errorf("left in layers/: %v", ents)
	}
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

func TestOpenContentRecovers(t *testing.T) {
	root := t.TempDir()
	c, _ := OpenContent(root)
	ref := ContentRef{KindLayer, key('d')}
	half, _ := c.Create(ref) // a build killed mid-step
	os.WriteFile(filepath.Join(half, "partial"), nil, 0o644)
	gc := filepath.Join(root, "layers", partialPrefix+"gc-"+key('e')) // killed mid-collect
	os.MkdirAll(gc, 0o755)
	old := filepath.Join(root, "images", key('f')+".tmp-x") // the old store's partial image
	os.MkdirAll(old, 0o755)
	if _, err := OpenContent(root); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{half, gc, old} {
		if exists(p) {
			t.Errorf("%s survived recovery", p)
		}
	}
}

func TestContentRefs(t *testing.T) {
	c, _ := OpenContent("/data/builds")
	for _, tc := range []struct {
		path string
		ok   bool
	}{
		{"/data/builds/layers/" + key('a'), true},
		{"/data/builds/images/" + key('a') + "/", true},
		{"/data/builds/layers/../x", false},
		{"/data/templates/base/rootfs", false},
		{"/data/builds/layers/.new-" + key('a'), false},
		{"/data/builds/other/" + key('a'), false},
	} {
		if _, ok := c.RefOf(tc.path); ok != tc.ok {
			t.Errorf("RefOf(%s) = %v, want %v", tc.path, ok, tc.ok)
		}
	}
	if _, err := c.Create(ContentRef{KindLayer, "../../etc"}); err == nil {
		t.Error("Create of an escaping key succeeded")
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
