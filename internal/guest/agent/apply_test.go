package agent

import (
	"archive/tar"
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pkg/xattr"
)

type change struct {
	name, body, link string
	typ              byte
	mode             int64
	xattrs           map[string]string
}

func changeSet(t *testing.T, cs ...change) *bytes.Buffer {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, c := range cs {
		h := &tar.Header{Name: c.name, Typeflag: c.typ, Mode: c.mode, Linkname: c.link, Size: int64(len(c.body)),
			Uid: os.Getuid(), Gid: os.Getgid(), Format: tar.FormatPAX}
		for k, v := range c.xattrs {
			if h.PAXRecords == nil {
				h.PAXRecords = map[string]string{}
			}
			h.PAXRecords["SCHILY.xattr."+k] = v
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(c.body))
	}
	tw.Close()
	return &buf
}

func applyRoot(t *testing.T) (string, http.Handler) {
	t.Helper()
	root := t.TempDir()
	for p, body := range map[string]string{"d/x": "x", "d/y": "y", "z": "z", "gone/a": "a"} {
		os.MkdirAll(filepath.Join(root, filepath.Dir(p)), 0o755)
		if err := os.WriteFile(filepath.Join(root, p), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root, New(Config{ApplyRoot: root}).Handler()
}

func postApply(t *testing.T, h http.Handler, body *bytes.Buffer) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/forkbox/apply", body))
	return rec
}

func read(t *testing.T, p string) string {
	b, err := os.ReadFile(p)
	if err != nil {
		return "<" + err.Error() + ">"
	}
	return string(b)
}

func leftovers(t *testing.T, root string) {
	t.Helper()
	filepath.Walk(root, func(p string, _ os.FileInfo, _ error) error {
		if strings.Contains(filepath.Base(p), ".forkbox-") {
			t.Errorf("left behind: %s", p)
		}
		return nil
	})
}

func TestApply(t *testing.T) {
	root, h := applyRoot(t)
	rec := postApply(t, h, changeSet(t,
		change{name: "z", typ: tar.TypeChar},
		change{name: "gone/a", typ: tar.TypeChar},
		change{name: "gone", typ: tar.TypeChar},
		change{name: "d/x", typ: tar.TypeReg, body: "X2", mode: 0o755},
		change{name: "n", typ: tar.TypeDir, mode: 0o750},
		change{name: "n/f", typ: tar.TypeReg, body: "new", mode: 0o600, xattrs: map[string]string{"user.e2b.k": "v"}},
		change{name: "n/l", typ: tar.TypeSymlink, link: "f"},
	))
	if rec.Code != http.StatusOK {
		t.Fatalf("apply: %d %s", rec.Code, rec.Body)
	}
	if _, err := os.Lstat(filepath.Join(root, "z")); !os.IsNotExist(err) {
		t.Errorf("z not deleted: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(root, "gone")); !os.IsNotExist(err) {
		t.Errorf("gone not deleted: %v", err)
	}
	if got := read(t, filepath.Join(root, "d/x")); got != "X2" {
		t.Errorf("d/x = %q", got)
	}
	if fi, _ := os.Stat(filepath.Join(root, "d/x")); fi == nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("d/x mode %v", fi)
	}
	if fi, _ := os.Stat(filepath.Join(root, "n")); fi == nil || fi.Mode().Perm() != 0o750 {
		t.Errorf("n mode %v", fi)
	}
	if v, err := xattr.Get(filepath.Join(root, "n/f"), "user.e2b.k"); err != nil || string(v) != "v" {
		t.Errorf("n/f metadata %q %v", v, err)
	}
	if l, _ := os.Readlink(filepath.Join(root, "n/l")); l != "f" {
		t.Errorf("n/l -> %q", l)
	}
	if got := read(t, filepath.Join(root, "d/y")); got != "y" {
		t.Errorf("untouched d/y = %q", got)
	}
	leftovers(t, root)
}

func TestApplyAllOrNothing(t *testing.T) {
	root, h := applyRoot(t)
	rec := postApply(t, h, changeSet(t,
		change{name: "z", typ: tar.TypeChar},
		change{name: "d/x", typ: tar.TypeReg, body: "changed", mode: 0o644},
		change{name: "new", typ: tar.TypeDir, mode: 0o755},
		change{name: "no/such/dir/f", typ: tar.TypeReg, body: "f", mode: 0o644},
	))
	if rec.Code != http.StatusConflict || !strings.Contains(rec.Body.String(), "no/such/dir/f") {
		t.Fatalf("apply: %d %s, want 409 naming the path", rec.Code, rec.Body)
	}
	if got := read(t, filepath.Join(root, "d/x")); got != "x" {
		t.Errorf("d/x after a failed apply = %q, want x", got)
	}
	if got := read(t, filepath.Join(root, "z")); got != "z" {
		t.Errorf("z after a failed apply = %q, want z", got)
	}
	if _, err := os.Lstat(filepath.Join(root, "new")); !os.IsNotExist(err) {
		t.Errorf("new dir left: %v", err)
	}
	leftovers(t, root)
	if rec := postApply(t, h, changeSet(t, change{name: "../escape", typ: tar.TypeReg, body: "x", mode: 0o644})); rec.Code != http.StatusBadRequest {
		t.Errorf("escape: %d %s", rec.Code, rec.Body)
	}
	leftovers(t, root)
}
