package fsdiff

import (
	"bytes"
	"fmt"
	"io"
	"unicode/utf8"

	udiff "github.com/aymanbagabas/go-udiff"
)

// MaxPatchFile is the largest file shown as text in a patch; bigger ones
// are named only, so a patch's memory stays bounded per file.
const MaxPatchFile = 1 << 20

// WritePatch writes c as a git-style unified diff: text contents as
// hunks, binary or large ones as a "Binary files differ" line, and
// metadata changes as header lines.
func WritePatch(w io.Writer, c Change) error {
	fmt.Fprintf(w, "diff --forkbox a%s b%s\n", c.Path, c.Path)
	switch c.Kind {
	case Added:
		fmt.Fprintf(w, "new %s mode %04o\n", c.New.Type, c.New.Mode)
	case Deleted:
		fmt.Fprintf(w, "deleted %s mode %04o\n", c.Old.Type, c.Old.Mode)
	default:
		writeMeta(w, c)
	}
	oldText, oldOK, err := text(c.Old)
	if err != nil {
		return err
	}
	newText, newOK, err := text(c.New)
	if err != nil {
		return err
	}
	if !oldOK || !newOK {
		fmt.Fprintf(w, "Binary files %s and %s differ\n", label("a", c.Path, c.Old), label("b", c.Path, c.New))
		return nil
	}
	if oldText == newText {
		return nil
	}
	_, err = io.WriteString(w, udiff.Unified(label("a", c.Path, c.Old), label("b", c.Path, c.New), oldText, newText))
	return err
}

func writeMeta(w io.Writer, c Change) {
	o, n := c.Old, c.New
	if o.Type != n.Type {
		fmt.Fprintf(w, "type %s => %s\n", o.Type, n.Type)
	}
	if o.Mode != n.Mode {
		fmt.Fprintf(w, "old mode %04o\nnew mode %04o\n", o.Mode, n.Mode)
	}
	if o.UID != n.UID || o.GID != n.GID {
		fmt.Fprintf(w, "owner %d:%d => %d:%d\n", o.UID, o.GID, n.UID, n.GID)
	}
	if o.Link != n.Link {
		fmt.Fprintf(w, "symlink %q => %q\n", o.Link, n.Link)
	}
	for _, k := range sortedKeys(union(o.Xattrs, n.Xattrs)) {
		ov, oin := o.Xattrs[k]
		nv, nin := n.Xattrs[k]
		switch {
		case !oin:
			fmt.Fprintf(w, "xattr +%s=%q\n", k, nv)
		case !nin:
			fmt.Fprintf(w, "xattr -%s\n", k)
		case ov != nv:
			fmt.Fprintf(w, "xattr %s=%q => %q\n", k, ov, nv)
		}
	}
}

func union(a, b map[string]string) map[string]bool {
	out := map[string]bool{}
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}

func label(side, p string, e *Entry) string {
	if e == nil {
		return "/dev/null"
	}
	return side + p
}

// text returns a file's content if it is text a patch can show; absent
// and non-file entries are empty text (a symlink's change is a header).
func text(e *Entry) (string, bool, error) {
	if e == nil || e.Type != TypeFile {
		return "", true, nil
	}
	if e.Size > MaxPatchFile {
		return "", false, nil
	}
	r, err := e.Open()
	if err != nil {
		return "", false, err
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		return "", false, err
	}
	if IsBinary(b) {
		return "", false, nil
	}
	return string(b), true, nil
}

// IsBinary reports whether b looks like binary data: a NUL byte in its
// first 8000 bytes (git's test) or invalid UTF-8.
func IsBinary(b []byte) bool {
	head := b[:min(len(b), 8000)]
	return bytes.IndexByte(head, 0) >= 0 || !utf8.Valid(b)
}

// Binary reports whether the entry is a file a patch shows as binary.
func (e *Entry) Binary() (bool, error) {
	_, ok, err := text(e)
	return e != nil && e.Type == TypeFile && !ok, err
}
