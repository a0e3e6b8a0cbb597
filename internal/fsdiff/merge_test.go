package fsdiff

import (
	"archive/tar"
	"bytes"
	"io"
	"strings"
	"testing"
)

func TestMerge(t *testing.T) {
	lw := lowerTree(t)
	base := Tree{Upper: EmptyLayer(), Lower: lw}
	from := tree(t, lw, dir("./etc/"), file("./etc/a", "theirs\n"), whiteout("./etc/b"), file("./f", "only theirs"), file("./same", "both"))
	target := tree(t, lw, dir("./etc/"), file("./etc/a", "ours\n"), file("./g", "only ours"), file("./same", "both"))
	tests := []struct {
		strategy       string
		take, conflict string
	}{
		{StrategyNone, "/etc/b /f", "/etc/a"},
		{StrategyTheirs, "/etc/a /etc/b /f", "/etc/a"},
		{StrategyOurs, "/etc/b /f", "/etc/a"},
	}
	for _, tt := range tests {
		t.Run("strategy="+tt.strategy, func(t *testing.T) {
			plan, err := Merge(base, from, target, Options{}, tt.strategy)
			if err != nil {
				t.Fatal(err)
			}
			var take, conflict []string
			for _, c := range plan.Take {
				take = append(take, c.Path)
			}
			for _, c := range plan.Conflicts {
				conflict = append(conflict, c.Path)
				if c.Ours == nil || c.Theirs == nil || c.Base == nil || c.Resolved != tt.strategy {
					t.Errorf("conflict %+v", c)
				}
			}
			if strings.Join(take, " ") != tt.take || strings.Join(conflict, " ") != tt.conflict || plan.Same != 1 {
				t.Errorf("take %v conflicts %v same %d", take, conflict, plan.Same)
			}
		})
	}
	if _, err := Merge(base, from, target, Options{}, "mine"); err == nil {
		t.Error("unknown strategy accepted")
	}
}

// TestMergeBelowConflict: what from adds inside a directory the target
// made a file is a conflict too, not a write that would fail.
func TestMergeBelowConflict(t *testing.T) {
	lw := lowerTree(t)
	base := Tree{Upper: EmptyLayer(), Lower: lw}
	from := tree(t, lw, dir("./d/"), file("./d/f", "x"), file("./z", "z"))
	target := tree(t, lw, file("./d", "a file"))
	plan, err := Merge(base, from, target, Options{}, StrategyNone)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Take) != 1 || plan.Take[0].Path != "/z" || len(plan.Conflicts) != 2 || plan.Conflicts[1].Path != "/d/f" {
		t.Errorf("take %+v conflicts %+v", plan.Take, plan.Conflicts)
	}
	plan, err = Merge(base, from, target, Options{}, StrategyTheirs)
	if err != nil || len(plan.Take) != 3 {
		t.Errorf("theirs: take %d, %v", len(plan.Take), err)
	}
}

func TestWriteChanges(t *testing.T) {
	lw := lowerTree(t)
	base := Tree{Upper: EmptyLayer(), Lower: lw}
	from := tree(t, lw, dir("./etc/"), whiteout("./etc/b"), dir("./d/"),
		hdr{name: "./d/f", body: "x", typ: tar.TypeReg, mode: 0o600, xattrs: map[string]string{"user.e2b.k": "v"}},
		hdr{name: "./d/l", typ: tar.TypeSymlink, link: "f"}, whiteout("./srv"))
	page, err := Diff(base, from, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	n, err := WriteChanges(&buf, page.Changes)
	if err != nil || n != 8 {
		t.Fatalf("wrote %d: %v", n, err)
	}
	var got []string
	tr := tar.NewReader(&buf)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		s := h.Name
		if IsWhiteout(h) {
			s = "-" + s
		}
		if x := XattrsOf(h); len(x) > 0 {
			s += "+" + x["user.e2b.k"]
		}
		got = append(got, s)
	}
	want := "-srv/old/y -srv/old/x -srv/old -srv -etc/b d d/f+v d/l"
	if strings.Join(got, " ") != want {
		t.Errorf("change set %v, want %s", got, want)
	}
}

func TestPatch(t *testing.T) {
	lw := lowerTree(t)
	base := Tree{Upper: EmptyLayer(), Lower: lw}
	b := tree(t, lw, dir("./etc/"), hdr{name: "./etc/a", body: "alpha\nmore\n", typ: tar.TypeReg, mode: 0o600}, dir("./usr/"), dir("./usr/bin/"), file("./usr/bin/sh", "\x7fELF\x00\x01"))
	page, err := Diff(base, b, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	for _, c := range page.Changes {
		if err := WritePatch(&buf, c); err != nil {
			t.Fatal(err)
		}
	}
	out := buf.String()
	for _, want := range []string{"--- a/etc/a", "+++ b/etc/a", "+more", "old mode 0644", "new mode 0600", "Binary files a/usr/bin/sh and b/usr/bin/sh differ"} {
		if !strings.Contains(out, want) {
			t.Errorf("patch lacks %q:\n%s", want, out)
		}
	}
}
