package build

import (
	"archive/tar"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/oci"
)

// CopySpec is one COPY step resolved against an upload.
type CopySpec struct {
	Src      string // path or glob in the build context, as the step names it
	Dest     string // absolute path in the rootfs; a trailing / means "into"
	UID, GID int    // owner of what is copied
	Mode     int64  // 0: keep the files' modes
}

// CopyInto copies what spec.Src matches in the unpacked upload at context
// into rootfs, the way Docker's COPY does: a directory's contents go into
// Dest, a file becomes Dest (or goes into it when Dest ends in / or several
// sources match). The upload is walked without following symlinks, and the
// result is written with oci.ApplyLayer, so nothing lands outside rootfs.
func CopyInto(ctx context.Context, rootfs, context string, spec CopySpec) error {
	if !path.IsAbs(spec.Dest) {
		return fmt.Errorf("copy: destination %q is not absolute: %w", spec.Dest, errdefs.ErrInvalidArgument)
	}
	if err := checkSourcePattern(spec.Src); err != nil {
		return err
	}
	matches, err := match(context, spec.Src)
	if err != nil {
		return err
	}
	if len(matches) == 0 {
		return fmt.Errorf("copy: %q matches nothing in the uploaded files: %w", spec.Src, errdefs.ErrInvalidArgument)
	}
	into := strings.HasSuffix(spec.Dest, "/") || len(matches) > 1
	pr, pw := io.Pipe()
	go func() {
		pw.CloseWithError(writeCopyTar(pw, context, matches, spec, into))
	}()
	_, err = oci.ApplyLayer(ctx, rootfs, pr, oci.ApplyOptions{})
	pr.CloseWithError(err)
	if err != nil {
		return fmt.Errorf("copy %s to %s: %w", spec.Src, spec.Dest, err)
	}
	return nil
}

func checkSourcePattern(src string) error {
	clean := path.Clean(src)
	if path.IsAbs(src) || clean == ".." || strings.HasPrefix(clean, "../") {
		return fmt.Errorf("copy: source %q is outside the build context: %w", src, errdefs.ErrInvalidArgument)
	}
	if _, err := path.Match(clean, ""); err != nil {
		return fmt.Errorf("copy: source pattern %q: %v: %w", src, err, errdefs.ErrInvalidArgument)
	}
	return nil
}

// match lists the context-relative paths src matches, component by
// component, walking the tree without following a symlink.
func match(context, src string) ([]string, error) {
	pattern := path.Clean(src)
	if pattern == "." {
		return []string{"."}, nil
	}
	depth := strings.Count(pattern, "/") + 1
	var out []string
	err := filepath.WalkDir(context, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(context, p)
		if rel == "." {
			return nil
		}
		rel = filepath.ToSlash(rel)
		n := strings.Count(rel, "/") + 1
		if ok, _ := path.Match(strings.Join(strings.SplitN(pattern, "/", depth)[:n], "/"), rel); !ok {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if n == depth {
			out = append(out, rel)
			if d.IsDir() {
				return filepath.SkipDir
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("copy: read uploaded files: %w", err)
	}
	return out, nil
}

// writeCopyTar writes the matched files, renamed to their destinations.
func writeCopyTar(w io.Writer, context string, matches []string, spec CopySpec, into bool) error {
	tw := tar.NewWriter(w)
	dest := strings.TrimPrefix(path.Clean(spec.Dest), "/")
	if dest == "" {
		dest = "."
	}
	for _, m := range matches {
		src := filepath.Join(context, filepath.FromSlash(m))
		fi, err := os.Lstat(src)
		if err != nil {
			return err
		}
		target := dest
		if !fi.IsDir() && into {
			target = path.Join(dest, path.Base(m))
		}
		if !fi.IsDir() {
			if err := copyEntry(tw, src, target, fi, spec); err != nil {
				return err
			}
			continue
		}
		err = filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(src, p)
			if rel == "." {
				return nil // a directory's contents are copied, not the directory
			}
			info, err := d.Info()
			if err != nil {
				return err
			}
			return copyEntry(tw, p, path.Join(target, filepath.ToSlash(rel)), info, spec)
		})
		if err != nil {
			return err
		}
	}
	return tw.Close()
}

func copyEntry(tw *tar.Writer, src, name string, fi fs.FileInfo, spec CopySpec) error {
	if strings.HasPrefix(path.Base(name), ".wh.") {
		return fmt.Errorf("copy: %q: names starting with .wh. are reserved for image layers: %w", name, errdefs.ErrInvalidArgument)
	}
	link := ""
	if fi.Mode()&fs.ModeSymlink != 0 {
		var err error
		if link, err = os.Readlink(src); err != nil {
			return err
		}
	}
	hdr, err := tar.FileInfoHeader(fi, link)
	if err != nil {
		return fmt.Errorf("copy: %s: %w", name, err)
	}
	if hdr.Name = name; fi.IsDir() {
		hdr.Name += "/"
	}
	hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname, hdr.Format = spec.UID, spec.GID, "", "", tar.FormatPAX
	if spec.Mode != 0 && fi.Mode()&fs.ModeSymlink == 0 {
		hdr.Mode = spec.Mode
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	if hdr.Typeflag != tar.TypeReg {
		return nil
	}
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(tw, f)
	return err
}
