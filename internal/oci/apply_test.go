package oci

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/forkbox/forkbox/internal/errdefs"
)

// ent is one tar entry of a test layer.
type ent struct {
	name, link, body string
	typ              byte
	mode             int64
	uid, gid         int
	xattrs           map[string]string
}

func dir(name string) ent        { return ent{name: name, typ: tar.TypeDir, mode: 0o755} }
func file(name, body string) ent { return ent{name: name, typ: tar.TypeReg, mode: 0o644, body: body} }
func symlink(name, target string) ent {
	return ent{name: name, typ: tar.TypeSymlink, link: target, mode: 0o777}
}
func hardlink(name, target string) ent {
	return ent{name: name, typ: tar.TypeLink, link: target, mode: 0o644}
}

var testTime = time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)

// layerTar writes the entries as a tar stream.
func layerTar(t testing.TB, ents ...ent) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range ents {
		h := &tar.Header{Name: e.name, Linkname: e.link, Typeflag: e.typ, Mode: e.mode, Uid: e.uid, Gid: e.gid,
			ModTime: testTime, Size: int64(len(e.body)), Format: tar.FormatPAX}
		if e.typ != tar.TypeReg {
			h.Size = 0
		}
		if e.typ == tar.TypeChar {
			h.Devmajor, h.Devminor = 1, 3
		}
		for k, v := range e.xattrs {
			if h.PAXRecords == nil {
				h.PAXRecords = map[string]string{}
			}
			h.PAXRecords[xattrPrefix+k] = v
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Size > 0 {
			if _, err := tw.Write([]byte(e.body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func apply(t *testing.T, root string, opts ApplyOptions, ents ...ent) (ApplyStats, error) {
	t.Helper()
	return ApplyLayer(context.Background(), root, bytes.NewReader(layerTar(t, ents...)), opts)
}

func mustApply(t *testing.T, root string, ents ...ent) ApplyStats {
	t.Helper()
	st, err := apply(t, root, ApplyOptions{}, ents...)
	if err != nil {
		t.Fatalf("apply: %v", err)
	}
	return st
}

func lstat(t *testing.T, p string) *syscall.Stat_t {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatalf("lstat: %v", err)
	}
	return fi.Sys().(*syscall.Stat_t)
}

func exists(p string) bool { _, err := os.Lstat(p); return err == nil }

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// netRawCap is a file capability (cap_net_raw+ep) as the kernel stores it.
func netRawCap() string {
	b := make([]byte, 20)
	binary.LittleEndian.PutUint32(b[0:], 0x02000001) // revision 2, effective
	binary.LittleEndian.PutUint32(b[4:], 1<<13)      // permitted: CAP_NET_RAW
	return string(b)
}

func TestApplyKeepsNodesAndMetadata(t *testing.T) {
	root := t.TempDir()
	suid := file("usr/bin/su", "#!su")
	suid.mode, suid.uid, suid.gid = 0o4755, 0, 0
	owned := file("home/user/.profile", "PATH=x")
	owned.uid, owned.gid, owned.mode = 1000, 1001, 0o600
	capped := file("usr/bin/ping", "ping")
	capped.mode, capped.xattrs = 0o755, map[string]string{"security.capability": netRawCap(), "user.note": "hi"}
	fifo := ent{name: "run/fifo", typ: tar.TypeFifo, mode: 0o620}
	dev := ent{name: "dev/null", typ: tar.TypeChar, mode: 0o666}
	sticky := dir("tmp")
	sticky.mode = 0o1777
	st := mustApply(t, root,
		dir("usr/"), sticky, suid, owned, capped, fifo, dev,
		symlink("bin", "usr/bin"), symlink("etc/abs", "/usr/bin/su"),
		hardlink("usr/bin/su2", "usr/bin/su"),
		file("deep/implied/parents/f", "x"),
	)
	want := ApplyStats{Files: 4, Dirs: 2, Symlinks: 2, Hardlinks: 1, Skipped: 1, Bytes: 4 + 6 + 4 + 1}
	if st != want {
		t.Errorf("stats %+v, want %+v", st, want)
	}
	if s := lstat(t, filepath.Join(root, "usr/bin/su")); s.Mode&0o7777 != 0o4755 || s.Uid != 0 {
		t.Errorf("su mode %o uid %d, want 4755 and 0", s.Mode&0o7777, s.Uid)
	}
	if s := lstat(t, filepath.Join(root, "home/user/.profile")); s.Uid != 1000 || s.Gid != 1001 || s.Mode&0o777 != 0o600 {
		t.Errorf(".profile uid %d gid %d mode %o", s.Uid, s.Gid, s.Mode&0o777)
	}
	if s := lstat(t, filepath.Join(root, "tmp")); s.Mode&0o7777 != 0o1777 {
		t.Errorf("tmp mode %o, want 1777", s.Mode&0o7777)
	}
	for attr, v := range capped.xattrs {
		got := make([]byte, 64)
		n, err := unix.Lgetxattr(filepath.Join(root, "usr/bin/ping"), attr, got)
		if err != nil || string(got[:n]) != v {
			t.Errorf("xattr %s = %q, %v; want %q", attr, got[:max(n, 0)], err, v)
		}
	}
	if s := lstat(t, filepath.Join(root, "run/fifo")); s.Mode&unix.S_IFMT != unix.S_IFIFO || s.Mode&0o777 != 0o620 {
		t.Errorf("fifo mode %o", s.Mode)
	}
	if exists(filepath.Join(root, "dev/null")) {
		t.Error("a device node was created")
	}
	if l, _ := os.Readlink(filepath.Join(root, "etc/abs")); l != "/usr/bin/su" {
		t.Errorf("absolute symlink reads %q", l)
	}
	if a, b := lstat(t, filepath.Join(root, "usr/bin/su")), lstat(t, filepath.Join(root, "usr/bin/su2")); a.Ino != b.Ino || a.Nlink != 2 {
		t.Errorf("hard link: inodes %d/%d nlink %d", a.Ino, b.Ino, a.Nlink)
	}
	if s := lstat(t, filepath.Join(root, "deep/implied")); s.Mode&0o777 != 0o755 {
		t.Errorf("implied parent mode %o, want 755", s.Mode&0o777)
	}
	if fi, _ := os.Stat(filepath.Join(root, "usr/bin/su")); !fi.ModTime().Equal(testTime) {
		t.Errorf("mtime %v, want %v", fi.ModTime(), testTime)
	}
	if fi, _ := os.Stat(filepath.Join(root, "usr")); !fi.ModTime().Equal(testTime) {
		t.Errorf("directory mtime %v, want %v (set after its children)", fi.ModTime(), testTime)
	}
	// Writing through the relative symlink bin -> usr/bin lands in usr/bin.
	mustApply(t, root, file("bin/through", "t"))
	if readFile(t, filepath.Join(root, "usr/bin/through")) != "t" {
		t.Error("entry under a symlinked directory did not land at its target")
	}
}

func TestApplyWhiteoutsAndReplacement(t *testing.T) {
	root := t.TempDir()
	mustApply(t, root,
		dir("etc"), file("etc/keep", "k"), file("etc/gone", "g"), dir("etc/sub"), file("etc/sub/x", "x"),
		dir("opq"), file("opq/old1", "1"), dir("opq/olddir"), file("opq/olddir/f", "f"),
		dir("opq/mixed"), file("opq/mixed/lower", "l"),
		file("was-file", "f"), dir("was-dir"), file("was-dir/child", "c"), file("linked", "L"),
		symlink("was-link", "etc"),
	)
	st := mustApply(t, root,
		file("etc/.wh.gone", ""), file("etc/.wh.sub", ""), file("etc/.wh.never-there", ""),
		// Children before and after the marker both survive it.
		file("opq/new-before", "b"), dir("opq"), file("opq/.wh..wh..opq", ""), file("opq/new-after", "a"),
		file("opq/mixed/upper", "u"),
		dir("was-file"), file("was-file/inside", "i"),
		file("was-dir", "now a file"),
		dir("was-link"),
		hardlink("linked2", "linked"),
		// A whiteout names lower layers only: this layer's own file stays.
		file("etc/fresh", "f"), file("etc/.wh.fresh", ""),
	)
	if st.Whiteouts != 5 {
		t.Errorf("whiteouts %d, want 5", st.Whiteouts)
	}
	for _, p := range []string{"etc/gone", "etc/sub", "opq/old1", "opq/olddir", "opq/mixed/lower", "was-dir/child",
		"etc/.wh.gone", "opq/.wh..wh..opq"} {
		if exists(filepath.Join(root, p)) {
			t.Errorf("%s survived", p)
		}
	}
	for _, p := range []string{"etc/keep", "opq/new-before", "opq/new-after", "opq/mixed/upper", "was-file/inside", "etc/fresh"} {
		if !exists(filepath.Join(root, p)) {
			t.Errorf("%s is missing", p)
		}
	}
	if readFile(t, filepath.Join(root, "was-dir")) != "now a file" {
		t.Error("directory not replaced by a file")
	}
	if fi, err := os.Lstat(filepath.Join(root, "was-link")); err != nil || !fi.IsDir() {
		t.Errorf("symlink not replaced by a directory: %v %v", fi, err)
	}
	if !exists(filepath.Join(root, "etc/keep")) {
		t.Error("replacing the symlink was-link -> etc touched etc")
	}
	if a, b := lstat(t, filepath.Join(root, "linked")), lstat(t, filepath.Join(root, "linked2")); a.Ino != b.Ino {
		t.Error("hard link to a lower layer's file is not the same inode")
	}
}

// TestApplyRefusesEscapes feeds layers that try to write outside the root;
// a host directory next to the root holds a victim file that must survive.
func TestApplyRefusesEscapes(t *testing.T) {
	base := t.TempDir()
	host := filepath.Join(base, "host")
	if err := os.Mkdir(host, 0o711); err != nil {
		t.Fatal(err)
	}
	victim := filepath.Join(host, "victim")
	if err := os.WriteFile(victim, []byte("host"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		ents     []ent
		untrust  bool
		wantErr  bool
		inRootAt string // where the write must land instead, if it succeeds
	}{
		{name: "dot-dot", ents: []ent{file("../host/victim", "evil")}, wantErr: true},
		{name: "dot-dot inside", ents: []ent{file("a/../../host/victim", "evil")}, wantErr: true},
		{name: "absolute", ents: []ent{file(victim, "evil")}, wantErr: true},
		{name: "hardlink dot-dot", ents: []ent{hardlink("h", "../host/victim")}, wantErr: true},
		{name: "hardlink absolute", ents: []ent{hardlink("h", victim)}, wantErr: true},
		{name: "symlink to parent then write", ents: []ent{symlink("up", "../../../.."), file("up/host/victim", "evil")},
			inRootAt: "host/victim"},
		// The symlink dangles inside the root: refused, never followed out.
		{name: "absolute symlink then write", ents: []ent{symlink("abs", host), file("abs/victim", "evil")},
			wantErr: true},
		{name: "absolute symlink resolves in the root",
			ents:     []ent{dir("inroot"), symlink("abs", "/inroot"), file("abs/victim", "evil")},
			inRootAt: "inroot/victim"},
		{name: "absolute symlink then hardlink out", ents: []ent{symlink("abs", host), hardlink("h", "abs/victim")},
			wantErr: true},
		{name: "absolute symlink then whiteout", ents: []ent{symlink("abs", host), file("abs/.wh.victim", "")}},
		{name: "absolute symlink then opaque", ents: []ent{symlink("abs", host), file("abs/.wh..wh..opq", "")}},
		{name: "symlink final component not followed", ents: []ent{symlink("f", victim), file("f", "evil")},
			inRootAt: "f"},
		{name: "untrusted symlink parent refused", untrust: true,
			ents: []ent{symlink("abs", host), file("abs/victim", "evil")}, wantErr: true},
		{name: "untrusted relative symlink parent refused", untrust: true,
			ents: []ent{dir("d"), symlink("l", "d"), file("l/x", "evil")}, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := filepath.Join(t.TempDir(), "root")
			if err := os.Mkdir(root, 0o755); err != nil {
				t.Fatal(err)
			}
			_, err := apply(t, root, ApplyOptions{Untrusted: tc.untrust}, tc.ents...)
			if tc.wantErr && !errors.Is(err, errdefs.ErrInvalidArgument) && !errors.Is(err, unix.ENOENT) {
				t.Errorf("err = %v, want a refusal", err)
			}
			if !tc.wantErr && err != nil {
				t.Errorf("err = %v, want the entry applied inside the root", err)
			}
			if got := readFile(t, victim); got != "host" {
				t.Fatalf("the host file was changed: %q", got)
			}
			if s := lstat(t, host); s.Mode&0o7777 != 0o711 {
				t.Fatalf("the host directory's mode changed to %o", s.Mode&0o7777)
			}
			if s := lstat(t, victim); s.Nlink != 1 {
				t.Fatalf("the host file gained a hard link (nlink %d)", s.Nlink)
			}
			if tc.inRootAt != "" && readFile(t, filepath.Join(root, tc.inRootAt)) != "evil" {
				t.Errorf("the write did not land at %s inside the root", tc.inRootAt)
			}
		})
	}
}

func TestApplyUntrusted(t *testing.T) {
	root := t.TempDir()
	owned := file("a/f", "12345")
	owned.uid, owned.xattrs = 4242, map[string]string{"user.x": "1"}
	fifo := ent{name: "p", typ: tar.TypeFifo, mode: 0o600}
	st, err := apply(t, root, ApplyOptions{Untrusted: true, MaxBytes: 10}, owned, fifo, file(".wh.plain", "w"))
	if err != nil {
		t.Fatal(err)
	}
	if s := lstat(t, filepath.Join(root, "a/f")); s.Uid != uint32(os.Getuid()) {
		t.Errorf("owner %d taken from an untrusted tar", s.Uid)
	}
	if n, _ := unix.Lgetxattr(filepath.Join(root, "a/f"), "user.x", make([]byte, 8)); n > 0 {
		t.Error("xattr taken from an untrusted tar")
	}
	if exists(filepath.Join(root, "p")) || st.Skipped != 1 {
		t.Errorf("fifo created from an untrusted tar (skipped %d)", st.Skipped)
	}
	if !exists(filepath.Join(root, ".wh.plain")) {
		t.Error("a .wh. name in an untrusted tar is a plain file")
	}
	_, err = apply(t, t.TempDir(), ApplyOptions{Untrusted: true, MaxBytes: 10}, file("a", "123456"), file("b", "123456"))
	if !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), "limit") {
		t.Errorf("oversized tar: err = %v", err)
	}
}

func TestApplyBadTar(t *testing.T) {
	_, err := ApplyLayer(context.Background(), t.TempDir(), strings.NewReader(strings.Repeat("x", 1024)), ApplyOptions{})
	if !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("garbage: err = %v", err)
	}
	_, err = apply(t, t.TempDir(), ApplyOptions{}, file("f", "x"), file("f/under-a-file", "y"))
	if err == nil {
		t.Error("an entry under a regular file was accepted")
	}
}

// TestApplyEdgeCases: long (PAX) names, a hard link to a symlink, a
// directory replacing a symlink of a lower layer, and parents reached
// through a lower layer's relative directory symlink (merged /usr).
func TestApplyEdgeCases(t *testing.T) {
	root := t.TempDir()
	long := strings.Repeat("d", 120) + "/" + strings.Repeat("f", 150)
	mustApply(t, root, dir("usr/lib"), symlink("lib", "usr/lib"), symlink("target-link", "usr/lib"),
		file(long, "long"), hardlink("hl-to-symlink", "target-link"), symlink("was-link-dir", "usr"))
	mustApply(t, root, file("lib/x86_64/libc.so", "elf"), dir("was-link-dir"), file("was-link-dir/f", "f"))
	if got := readFile(t, filepath.Join(root, long)); got != "long" {
		t.Errorf("long name: %q", got)
	}
	if l, err := os.Readlink(filepath.Join(root, "hl-to-symlink")); err != nil || l != "usr/lib" {
		t.Errorf("hard link to a symlink reads %q, %v", l, err)
	}
	if got := readFile(t, filepath.Join(root, "usr/lib/x86_64/libc.so")); got != "elf" {
		t.Errorf("entry under a lower layer's directory symlink: %q", got)
	}
	if fi, err := os.Lstat(filepath.Join(root, "lib")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Error("writing under lib/ replaced the symlink")
	}
	if fi, err := os.Lstat(filepath.Join(root, "was-link-dir")); err != nil || !fi.IsDir() || exists(filepath.Join(root, "usr/f")) {
		t.Errorf("a directory entry over a symlink: %v %v", fi, err)
	}
}
