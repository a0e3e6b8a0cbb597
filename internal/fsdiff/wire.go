package fsdiff

import (
	"archive/tar"
	"fmt"
	"io"
	"slices"
	"strings"
)

// The change set an agent applies is a tar stream: deletions first,
// deepest path first, as overlay whiteouts (character devices 0/0), then
// the entries to write in path order (a directory before what it holds),
// each with its mode, owner, symlink target and user.* xattrs as PAX
// records; a written entry's xattrs are exactly those listed.

// IsWhiteout reports whether hdr is a deletion.
func IsWhiteout(hdr *tar.Header) bool {
	return hdr.Typeflag == tar.TypeChar && hdr.Devmajor == 0 && hdr.Devminor == 0
}

// XattrsOf returns the user.* attributes hdr carries.
func XattrsOf(hdr *tar.Header) map[string]string {
	out := map[string]string{}
	for k, v := range hdr.PAXRecords {
		if name, ok := strings.CutPrefix(k, paxXattr); ok && strings.HasPrefix(name, userXattrPfx) {
			out[name] = v
		}
	}
	return out
}

// WriteChanges writes changes (their New side: nil deletes) to w as the
// change set; it returns the number of entries written.
func WriteChanges(w io.Writer, changes []Change) (int, error) {
	var dels, puts []Change
	for _, c := range changes {
		if c.New == nil {
			dels = append(dels, c)
		} else {
			puts = append(puts, c)
		}
	}
	slices.SortFunc(dels, func(a, b Change) int { return strings.Compare(b.Path, a.Path) })
	slices.SortFunc(puts, func(a, b Change) int { return strings.Compare(a.Path, b.Path) })
	tw := tar.NewWriter(w)
	for _, c := range dels {
		hdr := &tar.Header{Name: strings.TrimPrefix(c.Path, "/"), Typeflag: tar.TypeChar, Format: tar.FormatPAX}
		if err := tw.WriteHeader(hdr); err != nil {
			return 0, err
		}
	}
	for _, c := range puts {
		if err := writeEntry(tw, c.Path, c.New); err != nil {
			return 0, fmt.Errorf("%s: %w", c.Path, err)
		}
	}
	return len(dels) + len(puts), tw.Close()
}

func writeEntry(tw *tar.Writer, p string, e *Entry) error {
	hdr := &tar.Header{
		Name: strings.TrimPrefix(p, "/"), Mode: int64(e.Mode), Uid: e.UID, Gid: e.GID,
		Linkname: e.Link, Format: tar.FormatPAX,
	}
	switch e.Type {
	case TypeFile:
		hdr.Typeflag, hdr.Size = tar.TypeReg, e.Size
	case TypeDir:
		hdr.Typeflag = tar.TypeDir
	case TypeSymlink:
		hdr.Typeflag = tar.TypeSymlink
	case TypeFifo:
		hdr.Typeflag = tar.TypeFifo
	default:
		return fmt.Errorf("cannot apply a %s", e.Type)
	}
	for k, v := range e.Xattrs {
		if hdr.PAXRecords == nil {
			hdr.PAXRecords = map[string]string{}
		}
		hdr.PAXRecords[paxXattr+k] = v
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	if e.Type != TypeFile {
		return nil
	}
	r, err := e.Open()
	if err != nil {
		return err
	}
	defer r.Close()
	n, err := io.Copy(tw, r)
	if err == nil && n != e.Size {
		err = fmt.Errorf("content is %d bytes, want %d", n, e.Size)
	}
	return err
}
