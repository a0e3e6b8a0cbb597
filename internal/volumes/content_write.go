package volumes

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"

	"github.com/forkbox/forkbox/internal/errdefs"
)

// Default modes of what the content API creates without a mode.
const (
	defaultDirMode  = 0o755
	defaultFileMode = 0o644
)

// MakeDir creates directory p (and, with parents, the missing ones above
// it) owned and moded by m or the defaults.
func (c *Content) MakeDir(p string, m Meta, parents bool) (Entry, error) {
	r, err := rel(p)
	if err != nil {
		return Entry{}, err
	}
	if r == "." {
		return Entry{}, fmt.Errorf("make dir /: %w", errdefs.ErrAlreadyExists)
	}
	if parents {
		if err := c.mkdirParents(path.Dir(r)); err != nil {
			return Entry{}, classify("make dir", p, err)
		}
	}
	if err := c.root.Mkdir(r, fs.FileMode(mode(m.Mode, defaultDirMode))); err != nil {
		if parents && os.IsExist(err) {
			return c.Stat(p) // mkdir -p: an existing directory is fine
		}
		return Entry{}, classify("make dir", p, err)
	}
	if err := c.setMeta(r, m, defaultDirMode); err != nil {
		return Entry{}, classify("make dir", p, err)
	}
	return c.Stat(p)
}

// mkdirParents makes r and every missing directory above it, each with
// the default owner and mode.
func (c *Content) mkdirParents(r string) error {
	if r == "." {
		return nil
	}
	if fi, err := c.root.Stat(r); err == nil {
		if !fi.IsDir() {
			return fmt.Errorf("%s: not a directory: %w", r, errdefs.ErrInvalidArgument)
		}
		return nil
	}
	if err := c.mkdirParents(path.Dir(r)); err != nil {
		return err
	}
	if err := c.root.Mkdir(r, defaultDirMode); err != nil && !os.IsExist(err) {
		return err
	}
	return c.setMeta(r, Meta{}, defaultDirMode)
}

// mode returns *m, or def when m is nil.
func mode(m *uint32, def uint32) uint32 {
	if m == nil {
		return def
	}
	return *m & 0o7777
}

// setMeta gives r the owner of m (the defaults where m has none) and its
// mode (def where it has none): a mkdir's mode is masked by the umask,
// the explicit chmod is not.
func (c *Content) setMeta(r string, m Meta, def uint32) error {
	uid, gid := uint32(DefaultUID), uint32(DefaultGID)
	if m.UID != nil {
		uid = *m.UID
	}
	if m.GID != nil {
		gid = *m.GID
	}
	if err := c.root.Lchown(r, int(uid), int(gid)); err != nil {
		return err
	}
	return c.root.Chmod(r, fs.FileMode(mode(m.Mode, def)))
}

// UpdateMetadata changes p's owner and mode where m names them.
func (c *Content) UpdateMetadata(p string, m Meta) (Entry, error) {
	r, err := rel(p)
	if err != nil {
		return Entry{}, err
	}
	fi, err := c.root.Lstat(r)
	if err != nil {
		return Entry{}, classify("update", p, err)
	}
	st := c.entry(r, fi)
	uid, gid := st.UID, st.GID
	if m.UID != nil {
		uid = *m.UID
	}
	if m.GID != nil {
		gid = *m.GID
	}
	if err := c.root.Lchown(r, int(uid), int(gid)); err != nil {
		return Entry{}, classify("update", p, err)
	}
	if m.Mode != nil && fi.Mode()&fs.ModeSymlink == 0 {
		if err := c.root.Chmod(r, fs.FileMode(*m.Mode&0o7777)); err != nil {
			return Entry{}, classify("update", p, err)
		}
	}
	return c.Stat(p)
}

// Remove deletes p and, for a directory, everything in it. The volume's
// root cannot be removed.
func (c *Content) Remove(p string) error {
	r, err := rel(p)
	if err != nil {
		return err
	}
	if r == "." {
		return fmt.Errorf("remove /: the volume's root: %w", errdefs.ErrInvalidArgument)
	}
	if _, err := c.root.Lstat(r); err != nil {
		return classify("remove", p, err)
	}
	return classify("remove", p, c.root.RemoveAll(r))
}

// ReadFile opens file p for reading; the caller closes it.
func (c *Content) ReadFile(p string) (*os.File, fs.FileInfo, error) {
	r, err := rel(p)
	if err != nil {
		return nil, nil, err
	}
	f, err := c.root.Open(r)
	if err != nil {
		return nil, nil, classify("read", p, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, classify("read", p, err)
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, fmt.Errorf("read %s: not a regular file: %w", p, errdefs.ErrInvalidArgument)
	}
	return f, fi, nil
}

// WriteFile writes body to file p, replacing what it held, creating it
// (and missing parent directories) owned and moded by m or the defaults.
// A write past the volume's limit is ErrResourceExhausted and leaves the
// partial file, as a full disk does.
func (c *Content) WriteFile(p string, body io.Reader, m Meta) (Entry, error) {
	r, err := rel(p)
	if err != nil {
		return Entry{}, err
	}
	if r == "." {
		return Entry{}, fmt.Errorf("write /: a directory: %w", errdefs.ErrInvalidArgument)
	}
	if err := c.mkdirParents(path.Dir(r)); err != nil {
		return Entry{}, classify("write", p, err)
	}
	_, statErr := c.root.Lstat(r)
	f, err := c.root.OpenFile(r, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, fs.FileMode(mode(m.Mode, defaultFileMode)))
	if err != nil {
		return Entry{}, classify("write", p, err)
	}
	_, err = io.Copy(f, body)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return Entry{}, classify("write", p, err)
	}
	if os.IsNotExist(statErr) || m != (Meta{}) {
		if err := c.setMetaKeep(r, m, statErr == nil); err != nil {
			return Entry{}, classify("write", p, err)
		}
	}
	return c.Stat(p)
}

// setMetaKeep applies m to r; for an existing file (existed) only what m
// names changes.
func (c *Content) setMetaKeep(r string, m Meta, existed bool) error {
	if !existed {
		return c.setMeta(r, m, defaultFileMode)
	}
	_, err := c.UpdateMetadata("/"+r, m)
	return err
}
