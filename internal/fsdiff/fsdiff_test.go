package fsdiff

import (
	"archive/tar"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// hdr is one entry of a test upper layer, as runsc writes them.
type hdr struct {
	name, body, link string
	typ              byte
	mode             int64
	xattrs           map[string]string
}

// writeLayer writes a tar like `runsc tar rootfs-upper` to a file.
func writeLayer(t *testing.T, hs ...hdr) string {
	t.Helper()
	return writeLayerB(t, hs...)
}

func writeLayerB(t testing.TB, hs ...hdr) string {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	all := append([]hdr{{name: "./", typ: tar.TypeDir, mode: 0o755}}, hs...)
	for _, h := range all {
		th := &tar.Header{Name: h.name, Typeflag: h.typ, Mode: h.mode, Linkname: h.link, Size: int64(len(h.body)), Format: tar.FormatPAX}
		for k, v := range h.xattrs {
			if th.PAXRecords == nil {
				th.PAXRecords = map[string]string{}
			}
			th.PAXRecords[paxXattr+k] = v
		}
		if err := tw.WriteHeader(th); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(h.body))
	}
	tw.Close()
	f := filepath.Join(t.TempDir(), "upper.tar")
	if err := os.WriteFile(f, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

func file(name, body string) hdr { return hdr{name: name, body: body, typ: tar.TypeReg, mode: 0o644} }
func dir(name string) hdr        { return hdr{name: name, typ: tar.TypeDir, mode: 0o755} }
func whiteout(name string) hdr   { return hdr{name: name, typ: tar.TypeChar} }

// lowerTree makes a host lower tree: /etc/{a,b}, /srv/old/{x,y}, /bin -> usr/bin.
func lowerTree(t testing.TB) *Lower {
	t.Helper()
	d := t.TempDir()
	for p, body := range map[string]string{"etc/a": "alpha\n", "etc/b": "beta\n", "srv/old/x": "x", "srv/old/y": "y", "usr/bin/sh": "\x7fELF\x00"} {
		os.MkdirAll(filepath.Join(d, filepath.Dir(p)), 0o755)
		if err := os.WriteFile(filepath.Join(d, p), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.Symlink("usr/bin", filepath.Join(d, "bin"))
	lw, err := NewLower(d)
	if err != nil {
		t.Fatal(err)
	}
	return lw
}

func tree(t *testing.T, lw *Lower, hs ...hdr) Tree {
	t.Helper()
	l, err := OpenLayer(writeLayer(t, hs...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return Tree{Upper: l, Lower: lw}
}

func summary(p Page) string {
	var out []string
	for _, c := range p.Changes {
		out = append(out, c.Kind[:1]+" "+c.Path+" "+strings.Join(c.What, ","))
	}
	return strings.Join(out, "\n")
}

func TestDiff(t *testing.T) {
	lw := lowerTree(t)
	base := Tree{Upper: EmptyLayer(), Lower: lw}
	tests := []struct {
		name  string
		upper []hdr
		opts  Options
		want  string
	}{
		{"nothing", nil, Options{}, ""},
		{"copied-up dir is no change", []hdr{dir("./etc/")}, Options{}, ""},
		{"edit", []hdr{dir("./etc/"), file("./etc/a", "ALPHA\n")}, Options{}, "m /etc/a content"},
		{"same bytes rewritten", []hdr{dir("./etc/"), file("./etc/a", "alpha\n")}, Options{}, ""},
		{"chmod", []hdr{dir("./etc/"), {name: "./etc/b", body: "beta\n", typ: tar.TypeReg, mode: 0o755}}, Options{}, "m /etc/b mode"},
		{"metadata", []hdr{dir("./etc/"), {name: "./etc/b", body: "beta\n", typ: tar.TypeReg, mode: 0o644, xattrs: map[string]string{"user.e2b.k": "v", "trusted.overlay.x": "y"}}}, Options{}, "m /etc/b xattrs"},
		{"add and symlink", []hdr{dir("./new/"), file("./new/f", "hi"), {name: "./new/l", typ: tar.TypeSymlink, link: "/etc/a"}}, Options{}, "a /new \na /new/f \na /new/l "},
		{"delete file", []hdr{dir("./etc/"), whiteout("./etc/b")}, Options{}, "d /etc/b "},
		{"delete dir lists what it held", []hdr{dir("./srv/"), whiteout("./srv/old")}, Options{}, "d /srv/old \nd /srv/old/x \nd /srv/old/y "},
		{"opaque dir", []hdr{dir("./srv/"), {name: "./srv/old/", typ: tar.TypeDir, mode: 0o755, xattrs: map[string]string{opaqueXattr: "y"}}, file("./srv/old/z", "z")}, Options{}, "d /srv/old/x \nd /srv/old/y \na /srv/old/z "},
		{"dir replaced by file", []hdr{dir("./srv/"), file("./srv/old", "f")}, Options{}, "m /srv/old type\nd /srv/old/x \nd /srv/old/y "},
		{"include", []hdr{dir("./etc/"), file("./etc/a", "1"), file("./etc/b", "2")}, Options{Include: []string{"/etc/b"}}, "m /etc/b content"},
		{"exclude glob", []hdr{dir("./etc/"), file("./etc/a", "1"), file("./etc/b", "2")}, Options{Exclude: []string{"/etc/[a]"}}, "m /etc/b content"},
		{"default excludes", []hdr{dir("./tmp/"), dir("./tmp/.X11-unix/"), file("./tmp/.X11-unix/X0", "")}, Options{}, "a /tmp "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			page, err := Diff(base, tree(t, lw, tt.upper...), tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			if got := summary(page); got != tt.want {
				t.Errorf("diff:\n%s\nwant:\n%s", got, tt.want)
			}
		})
	}
}

func TestDiffHashesAndPaging(t *testing.T) {
	lw := lowerTree(t)
	var hs []hdr
	hs = append(hs, dir("./many/"))
	for _, c := range "abcdefghij" {
		hs = append(hs, file("./many/"+string(c), string(c)))
	}
	a, b := Tree{Upper: EmptyLayer(), Lower: lw}, tree(t, lw, hs...)
	var got []string
	o := Options{Limit: 4}
	for pages := 0; ; pages++ {
		page, err := Diff(a, b, o)
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Changes) > 4 || pages > 5 {
			t.Fatalf("page of %d changes, page %d", len(page.Changes), pages)
		}
		for _, c := range page.Changes {
			got = append(got, c.Path)
			if c.New.Type == TypeFile && len(c.New.SHA256) != 64 {
				t.Errorf("%s: hash %q", c.Path, c.New.SHA256)
			}
		}
		if page.Next == "" {
			break
		}
		o.After = page.Next
	}
	if len(got) != 11 || got[0] != "/many" || got[10] != "/many/j" {
		t.Errorf("paged paths %v", got)
	}
}

func TestDiffRefuses(t *testing.T) {
	lw := lowerTree(t)
	a := Tree{Upper: EmptyLayer(), Lower: lw}
	for _, o := range []Options{{Include: []string{"etc"}}, {Exclude: []string{"/../etc"}}, {Include: []string{"/["}}, {Limit: MaxLimit + 1}} {
		if _, err := Diff(a, a, o); err == nil {
			t.Errorf("%+v: no error", o)
		}
	}
	if _, err := OpenLayer(writeLayer(t, file("../escape", "x"))); err == nil {
		t.Error("a layer escaping the root was read")
	}
	// A lower symlink is never followed to the host.
	if e, err := lw.Lookup("/bin/sh"); err != nil || e != nil {
		t.Errorf("lookup through a symlink: %v %v", e, err)
	}
}

func TestDiffUnrelatedLowers(t *testing.T) {
	a := Tree{Upper: EmptyLayer(), Lower: lowerTree(t)}
	b := tree(t, lowerTree(t), dir("./etc/"), file("./etc/a", "other\n"), whiteout("./etc/b"))
	page, err := Diff(a, b, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := summary(page), "m /etc/a content\nd /etc/b "; got != want {
		t.Errorf("diff:\n%s\nwant:\n%s", got, want)
	}
}
