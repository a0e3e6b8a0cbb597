package build

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/template/dockerfile"
)

type tent struct {
	name, link, body string
	typ              byte
	mode             int64
}

// uploadTar is a build context as the E2B SDK tars it (names relative to
// the context), gzip'd when zip is set.
func uploadTar(t *testing.T, zip bool, ents ...tent) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range ents {
		h := &tar.Header{Name: e.name, Linkname: e.link, Typeflag: e.typ, Mode: e.mode, Size: int64(len(e.body))}
		if e.typ != tar.TypeReg {
			h.Size = 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(e.body))
	}
	tw.Close()
	if !zip {
		return buf.Bytes()
	}
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	zw.Write(buf.Bytes())
	zw.Close()
	return z.Bytes()
}

const hashA = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"

func TestUploads(t *testing.T) {
	dir := t.TempDir()
	u, err := NewUploads(dir, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	good := uploadTar(t, true, tent{name: "src/", typ: tar.TypeDir, mode: 0o755},
		tent{name: "src/app.js", typ: tar.TypeReg, mode: 0o644, body: "console.log(1)"})
	if err := u.Put(context.Background(), "tplA", hashA, bytes.NewReader(good)); err != nil {
		t.Fatal(err)
	}
	if !u.Has("tplA", hashA) {
		t.Fatal("upload not present")
	}
	p, _ := u.Path("tplA", hashA)
	if b, _ := os.ReadFile(filepath.Join(p, "src/app.js")); string(b) != "console.log(1)" {
		t.Errorf("content %q", b)
	}
	// The same files again are accepted (and read to the end).
	if err := u.Put(context.Background(), "tplA", hashA, bytes.NewReader(good)); err != nil {
		t.Errorf("second put: %v", err)
	}
	checkUploadConflicts(t, u, good)
	bad := []struct {
		name string
		hash string
		body []byte
	}{
		{"bad hash", "../../etc", good},
		{"dot-dot", strings.Repeat("b", 64), uploadTar(t, true, tent{name: "../evil", typ: tar.TypeReg, mode: 0o644, body: "x"})},
		{"absolute", strings.Repeat("c", 64), uploadTar(t, false, tent{name: "/etc/evil", typ: tar.TypeReg, mode: 0o644, body: "x"})},
		{"symlink parent", strings.Repeat("d", 64), uploadTar(t, true, tent{name: "l", typ: tar.TypeSymlink, link: "/tmp"},
			tent{name: "l/evil", typ: tar.TypeReg, mode: 0o644, body: "x"})},
		{"oversized", strings.Repeat("e", 64), uploadTar(t, true, tent{name: "big", typ: tar.TypeReg, mode: 0o644, body: strings.Repeat("x", 2<<20)})},
		{"not a tar", strings.Repeat("f", 64), []byte(strings.Repeat("garbage!", 200))},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			err := u.Put(context.Background(), "tplA", tc.hash, bytes.NewReader(tc.body))
			if !errors.Is(err, errdefs.ErrInvalidArgument) {
				t.Errorf("err = %v, want invalid argument", err)
			}
			if u.Has("tplA", tc.hash) {
				t.Error("a refused upload is present")
			}
			if ents, _ := os.ReadDir(filepath.Join(dir, "tmp")); len(ents) != 0 {
				t.Errorf("scratch left: %v", ents)
			}
		})
	}
	if _, err := os.Stat("/tmp/evil"); err == nil {
		t.Error("/tmp/evil was written")
	}
	if err := u.Put(context.Background(), "../x", hashA, bytes.NewReader(good)); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("template id ../x: %v", err)
	}
	if err := u.Remove("tplA"); err != nil || u.Has("tplA", hashA) {
		t.Errorf("after Remove: %v, still has it %v", err, u.Has("tplA", hashA))
	}
}

// checkUploadConflicts: a second upload of a hash with other files is
// refused and changes nothing; another template's upload of the same hash
// is its own, with its own digest; same files, same digest.
func checkUploadConflicts(t *testing.T, u *Uploads, good []byte) {
	t.Helper()
	ctx := context.Background()
	other := uploadTar(t, true, tent{name: "src/", typ: tar.TypeDir, mode: 0o755},
		tent{name: "src/app.js", typ: tar.TypeReg, mode: 0o644, body: "console.log(2)"})
	before, _ := u.Digest("tplA", hashA)
	if err := u.Put(ctx, "tplA", hashA, bytes.NewReader(other)); !errors.Is(err, errdefs.ErrConflict) {
		t.Errorf("other files under the same hash: %v, want conflict", err)
	}
	p, _ := u.Path("tplA", hashA)
	if b, _ := os.ReadFile(filepath.Join(p, "src/app.js")); string(b) != "console.log(1)" {
		t.Errorf("after the refused upload the content is %q", b)
	}
	if u.Has("tplB", hashA) {
		t.Error("template B sees template A's upload")
	}
	if err := u.Put(ctx, "tplB", hashA, bytes.NewReader(other)); err != nil {
		t.Fatalf("template B's own upload of the hash: %v", err)
	}
	pb, _ := u.Path("tplB", hashA)
	if b, _ := os.ReadFile(filepath.Join(pb, "src/app.js")); string(b) != "console.log(2)" {
		t.Errorf("template B's upload holds %q", b)
	}
	dA, _ := u.Digest("tplA", hashA)
	dB, _ := u.Digest("tplB", hashA)
	if dA != before || dA == dB || dA == "" {
		t.Errorf("digests: A %q (was %q), B %q", dA, before, dB)
	}
	if err := u.Put(ctx, "tplC", hashA, bytes.NewReader(good)); err != nil {
		t.Fatal(err)
	}
	if dC, _ := u.Digest("tplC", hashA); dC != dA {
		t.Errorf("same files, digests %q and %q", dC, dA)
	}
}

func TestCopyInto(t *testing.T) {
	host := t.TempDir()
	ctxDir := t.TempDir()
	for p, body := range map[string]string{"src/a.js": "a", "src/sub/b.js": "b", "README.md": "readme", "notes.md": "n"} {
		os.MkdirAll(filepath.Join(ctxDir, filepath.Dir(p)), 0o755)
		os.WriteFile(filepath.Join(ctxDir, p), []byte(body), 0o640)
	}
	os.Symlink(host, filepath.Join(ctxDir, "hostlink"))
	os.WriteFile(filepath.Join(host, "secret"), []byte("s"), 0o600)
	tests := []struct {
		name  string
		spec  CopySpec
		files map[string]string // rootfs path → content ("->x": symlink to x)
		err   bool
	}{
		{"dir contents", CopySpec{Src: "src", Dest: "/app"}, map[string]string{"app/a.js": "a", "app/sub/b.js": "b"}, false},
		{"file into dir", CopySpec{Src: "README.md", Dest: "/app/"}, map[string]string{"app/README.md": "readme"}, false},
		{"file renamed", CopySpec{Src: "README.md", Dest: "/etc/motd"}, map[string]string{"etc/motd": "readme"}, false},
		{"glob", CopySpec{Src: "*.md", Dest: "/docs"}, map[string]string{"docs/README.md": "readme", "docs/notes.md": "n"}, false},
		{"nested glob", CopySpec{Src: "src/*.js", Dest: "/js/"}, map[string]string{"js/a.js": "a"}, false},
		{"whole context", CopySpec{Src: ".", Dest: "/w"}, map[string]string{"w/src/a.js": "a", "w/hostlink": "->" + host}, false},
		{"symlink copied as a link", CopySpec{Src: "hostlink", Dest: "/l"}, map[string]string{"l": "->" + host}, false},
		{"no traversal through a symlink", CopySpec{Src: "hostlink/secret", Dest: "/x"}, nil, true},
		{"outside the context", CopySpec{Src: "../x", Dest: "/x"}, nil, true},
		{"relative dest", CopySpec{Src: "src", Dest: "app"}, nil, true},
		{"nothing matches", CopySpec{Src: "nope", Dest: "/x"}, nil, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rootfs := t.TempDir()
			err := CopyInto(context.Background(), rootfs, ctxDir, tc.spec)
			if tc.err != (err != nil) {
				t.Fatalf("err = %v", err)
			}
			for p, want := range tc.files {
				full := filepath.Join(rootfs, p)
				if target, ok := strings.CutPrefix(want, "->"); ok {
					if l, _ := os.Readlink(full); l != target {
						t.Errorf("%s links to %q", p, l)
					}
					continue
				}
				if b, err := os.ReadFile(full); err != nil || string(b) != want {
					t.Errorf("%s = %q, %v", p, b, err)
				}
			}
		})
	}
	// Owner and mode; a destination that is an absolute symlink to a host
	// directory resolves inside the rootfs.
	rootfs := t.TempDir()
	os.Symlink(host, filepath.Join(rootfs, "app"))
	err := CopyInto(context.Background(), rootfs, ctxDir, CopySpec{Src: "src", Dest: "/app", UID: 1000, GID: 1001, Mode: 0o700})
	if err == nil {
		t.Log("copy through a dangling in-root symlink succeeded")
	}
	if ents, _ := os.ReadDir(host); len(ents) != 1 {
		t.Fatalf("the copy wrote into the host directory: %v", ents)
	}
	rootfs = t.TempDir()
	if err := CopyInto(context.Background(), rootfs, ctxDir, CopySpec{Src: "src", Dest: "/app", UID: 1000, GID: 1001, Mode: 0o700}); err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(filepath.Join(rootfs, "app/sub/b.js"))
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != 1000 || st.Gid != 1001 || fi.Mode().Perm() != 0o700 {
		t.Errorf("owner %d:%d mode %v", st.Uid, st.Gid, fi.Mode())
	}
}

func TestStepKey(t *testing.T) {
	run := dockerfile.Step{Type: "RUN", Args: []string{"echo hi"}}
	keys := map[string]string{
		"base":        StepKey("p", run),
		"parent":      StepKey("q", run),
		"args":        StepKey("p", dockerfile.Step{Type: "RUN", Args: []string{"echo ho"}}),
		"user":        StepKey("p", dockerfile.Step{Type: "RUN", Args: []string{"echo hi", "root"}}),
		"files":       StepKey("p", dockerfile.Step{Type: "COPY", Args: []string{"a", "/b", "", ""}, FilesHash: hashA}),
		"files other": StepKey("p", dockerfile.Step{Type: "COPY", Args: []string{"a", "/b", "", ""}, FilesHash: strings.Repeat("b", 64)}),
	}
	seen := map[string]string{}
	for name, k := range keys {
		if other, ok := seen[k]; ok {
			t.Errorf("%s and %s share a key", name, other)
		}
		seen[k] = name
	}
	if StepKey("p", dockerfile.Step{Type: "RUN", Args: []string{"echo hi"}, Force: true}) != keys["base"] {
		t.Error("force changed the key")
	}
}
