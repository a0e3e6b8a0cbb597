package agent

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/pkg/xattr"
	"golang.org/x/sys/unix"
)

// commit moves every staged change into place, logging how to undo it.
func (run *applyRun) commit() error {
	for i := range run.changes {
		c := &run.changes[i]
		var err error
		switch c.kind {
		case applyDelete:
			_, err = run.moveAside(c.path)
		case applyDir:
			err = run.putDir(c)
		case applyPut:
			err = run.put(c)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", c.path[len(run.root):], err)
		}
	}
	return nil
}

// rollback undoes what commit did, newest first.
func (run *applyRun) rollback() error {
	var errs []error
	for i := len(run.undo) - 1; i >= 0; i-- {
		if err := run.undo[i](); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// dropBackups removes what the changes replaced, once all are in place.
func (run *applyRun) dropBackups() {
	for _, b := range run.backups {
		os.RemoveAll(b)
	}
}

// moveAside renames p (if it exists) to a backup beside it, on the same
// file system, and reports whether there was anything.
func (run *applyRun) moveAside(p string) (bool, error) {
	run.n++
	bak := filepath.Join(filepath.Dir(p), fmt.Sprintf(".forkbox-bak-%s-%d", run.token, run.n))
	// No Lstat first: a rename of nothing says so, and each call costs.
	if err := os.Rename(p, bak); errors.Is(err, fs.ErrNotExist) {
		if _, derr := os.Lstat(filepath.Dir(p)); derr != nil {
			return false, derr // the directory is missing: say which
		}
		return false, nil
	} else if err != nil {
		return false, err
	}
	run.backups = append(run.backups, bak)
	run.undo = append(run.undo, func() error { return os.Rename(bak, p) })
	return true, nil
}

// putDir makes c's directory, or gives an existing one c's metadata.
func (run *applyRun) putDir(c *stagedChange) error {
	fi, err := os.Lstat(c.path)
	if err == nil && fi.IsDir() {
		old, err := dirMeta(c.path, fi)
		if err != nil {
			return err
		}
		run.undo = append(run.undo, func() error { return setMeta(c.path, old) })
		return setMeta(c.path, c.hdr)
	}
	if _, err := run.moveAside(c.path); err != nil {
		return err
	}
	if err := os.Mkdir(c.path, 0o700); err != nil {
		return err
	}
	run.undo = append(run.undo, func() error { return os.Remove(c.path) })
	return setMeta(c.path, c.hdr)
}

// dirMeta captures an existing directory's metadata as a header.
func dirMeta(p string, fi fs.FileInfo) (*tar.Header, error) {
	hdr, err := tar.FileInfoHeader(fi, "")
	if err != nil {
		return nil, err
	}
	hdr.PAXRecords = map[string]string{}
	names, err := xattr.LList(p)
	if err != nil && !xattrUnsupported(err) {
		return nil, err
	}
	for _, n := range names {
		if v, err := xattr.LGet(p, n); err == nil && len(n) > 5 && n[:5] == "user." {
			hdr.PAXRecords["SCHILY.xattr."+n] = string(v)
		}
	}
	return hdr, nil
}

// put moves c's staged entry into place in one call where it can: a
// rename that refuses to replace (nothing was there: undo removes it), or
// else an exchange (what was there lands in the staging directory, which
// goes at the end: undo exchanges back).
func (run *applyRun) put(c *stagedChange) error {
	err := unix.Renameat2(unix.AT_FDCWD, c.staged, unix.AT_FDCWD, c.path, unix.RENAME_NOREPLACE)
	if errors.Is(err, unix.EEXIST) {
		err = unix.Renameat2(unix.AT_FDCWD, c.staged, unix.AT_FDCWD, c.path, unix.RENAME_EXCHANGE)
		if err == nil {
			run.undo = append(run.undo, func() error {
				return unix.Renameat2(unix.AT_FDCWD, c.staged, unix.AT_FDCWD, c.path, unix.RENAME_EXCHANGE)
			})
			return nil
		}
	} else if err == nil {
		run.undo = append(run.undo, func() error { return os.Remove(c.path) })
		return nil
	}
	if !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.EXDEV) && !errors.Is(err, unix.ENOSYS) {
		return &os.PathError{Op: "rename", Path: c.path, Err: err}
	}
	return run.putAside(c)
}

// putAside is put where renameat2 cannot: what was there moved aside,
// the staged entry renamed (or, across file systems, copied) in.
func (run *applyRun) putAside(c *stagedChange) error {
	if _, err := run.moveAside(c.path); err != nil {
		return err
	}
	err := os.Rename(c.staged, c.path)
	if errors.Is(err, syscall.EXDEV) {
		err = copyStaged(c)
	}
	if err != nil {
		return err
	}
	run.undo = append(run.undo, func() error { return os.Remove(c.path) })
	return nil
}

// copyStaged puts a staged entry on another file system (a volume):
// copied beside the target, then renamed over it.
func copyStaged(c *stagedChange) error {
	tmp := c.path + ".forkbox-apply"
	var err error
	switch c.hdr.Typeflag {
	case tar.TypeReg:
		err = copyFile(c.staged, tmp)
	case tar.TypeSymlink:
		err = os.Symlink(c.hdr.Linkname, tmp)
	default:
		err = syscall.Mkfifo(tmp, 0o600)
	}
	if err == nil {
		err = setMeta(tmp, c.hdr)
	}
	if err == nil {
		err = os.Rename(tmp, c.path)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
