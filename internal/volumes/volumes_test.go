package volumes

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/forkbox/forkbox/internal/errdefs"
)

// newVolume makes a real loop-mounted volume of sizeMB (the test runs as
// root, as the daemon does).
func newVolume(t *testing.T, sizeMB int) (*Host, *Content) {
	t.Helper()
	h, err := New(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := h.Create(ctx, "vol1", sizeMB); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := h.Remove(ctx, "vol1"); err != nil {
			t.Error(err)
		}
	})
	c, err := h.Open("vol1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return h, c
}

func TestContentRoundTrip(t *testing.T) {
	_, c := newVolume(t, 16)
	if ents, err := c.List("/", 1); err != nil || len(ents) != 0 {
		t.Fatalf("a new volume lists %v, %v; want empty", ents, err)
	}
	e, err := c.WriteFile("/a/b/hello.txt", strings.NewReader("hi"), Meta{})
	if err != nil {
		t.Fatal(err)
	}
	if e.Type != "file" || e.Size != 2 || e.UID != DefaultUID || e.Mode != 0o644 || e.Path != "/a/b/hello.txt" {
		t.Errorf("written entry %+v", e)
	}
	f, _, err := c.ReadFile("a/b/hello.txt")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(f)
	f.Close()
	if string(got) != "hi" {
		t.Errorf("read %q", got)
	}
	ents, err := c.List("/", 3)
	if err != nil || len(ents) != 3 {
		t.Fatalf("depth-3 list: %v, %v", ents, err)
	}
	mode, uid := uint32(0o600), uint32(0)
	if e, err = c.UpdateMetadata("/a/b/hello.txt", Meta{Mode: &mode, UID: &uid}); err != nil || e.Mode != 0o600 || e.UID != 0 || e.GID != DefaultGID {
		t.Errorf("update: %+v %v", e, err)
	}
	if _, err := c.MakeDir("/x/y", Meta{}, false); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("mkdir without parents: %v, want not found", err)
	}
	if e, err := c.MakeDir("/x/y", Meta{}, true); err != nil || e.Type != "directory" {
		t.Errorf("mkdir -p: %+v %v", e, err)
	}
	if err := c.Remove("/a"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Stat("/a/b/hello.txt"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("stat after remove: %v", err)
	}
	if err := c.Remove("/"); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("remove /: %v", err)
	}
}

func TestContentRefusesEscapes(t *testing.T) {
	h, c := newVolume(t, 16)
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "secret"), []byte("s"), 0o644)
	if err := os.Symlink(outside, filepath.Join(h.Dir("vol1"), "out")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(h.Dir("vol1"), "passwd")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"../x", "/a/../../etc/passwd", "out/secret", "passwd"} {
		if _, _, err := c.ReadFile(p); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("read %q: %v, want invalid argument", p, err)
		}
		if _, err := c.WriteFile(p, strings.NewReader("x"), Meta{}); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("write %q: %v, want invalid argument", p, err)
		}
	}
	if _, err := c.List("out", 1); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("list through an escaping symlink: %v", err)
	}
	if e, err := c.Stat("out"); err != nil || e.Type != "symlink" || e.Target != outside {
		t.Errorf("stat of the symlink itself: %+v %v", e, err)
	}
	if err := c.Remove("out/secret"); err == nil {
		t.Errorf("remove through an escaping symlink succeeded")
	}
	if _, err := os.Stat(filepath.Join(outside, "secret")); err != nil {
		t.Errorf("the file outside is gone: %v", err)
	}
}

func TestContentFull(t *testing.T) {
	_, c := newVolume(t, 8)
	_, err := c.WriteFile("/big", bytes.NewReader(make([]byte, 9<<20)), Meta{})
	if !errors.Is(err, errdefs.ErrResourceExhausted) {
		t.Fatalf("writing 9 MiB into an 8 MiB volume: %v, want resource exhausted", err)
	}
}

func TestEnsureRemounts(t *testing.T) {
	h, c := newVolume(t, 8)
	if _, err := c.WriteFile("/keep", strings.NewReader("k"), Meta{}); err != nil {
		t.Fatal(err)
	}
	c.Close()
	if err := unmount(h.Dir("vol1")); err != nil {
		t.Fatal(err)
	}
	if err := h.Ensure(context.Background(), "vol1"); err != nil {
		t.Fatal(err)
	}
	c2, err := h.Open("vol1")
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if e, err := c2.Stat("/keep"); err != nil || e.Size != 1 {
		t.Errorf("after a remount: %+v %v", e, err)
	}
}

// TestEnsureElsewhere: a volume whose storage is on another node (none
// here) is not found, and its Ensure leaves no directory behind (a
// cluster's create placed away from its volume's node did).
func TestEnsureElsewhere(t *testing.T) {
	h, err := New(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Ensure(context.Background(), "elsewhere"); !errdefs.IsNotFound(err) {
		t.Fatalf("Ensure of a volume with no storage here: %v, want not found", err)
	}
	if ids, err := h.IDs(); err != nil || len(ids) != 0 {
		t.Errorf("storage left: %v %v", ids, err)
	}
}
