package volumes

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"
	"time"

	"github.com/forkbox/forkbox/internal/errdefs"
)

// Entry is one file, directory or symlink of a volume, as E2B's volume
// content API reports it.
type Entry struct {
	Name   string    `json:"name"`
	Path   string    `json:"path"`
	Type   string    `json:"type"` // file, directory, symlink, unknown
	Size   int64     `json:"size"`
	Mode   uint32    `json:"mode"` // permission bits
	UID    uint32    `json:"uid"`
	GID    uint32    `json:"gid"`
	Atime  time.Time `json:"atime"`
	Mtime  time.Time `json:"mtime"`
	Ctime  time.Time `json:"ctime"`
	Target string    `json:"target,omitempty"`
}

// Meta are the owner and mode to give an entry; nil fields are left as
// they are (or the defaults for a new entry).
type Meta struct {
	UID, GID *uint32
	Mode     *uint32
}

// Content is one volume's files, every path resolved beneath its root by
// os.Root: ".." and symlinks cannot leave the volume. Close it after use.
type Content struct {
	root *os.Root
}

// Open returns volume id's content; the volume must be mounted (Ensure).
func (h *Host) Open(id string) (*Content, error) {
	if !isMountPoint(h.Dir(id)) {
		return nil, fmt.Errorf("volume %s is not mounted: %w", id, errdefs.ErrUnavailable)
	}
	r, err := os.OpenRoot(h.Dir(id))
	if err != nil {
		return nil, fmt.Errorf("open volume %s: %w", id, err)
	}
	return &Content{root: r}, nil
}

// Close releases the volume's root.
func (c *Content) Close() error { return c.root.Close() }

// rel turns an API path ("/a/b", "a/b", "/") into one relative to the
// root ("a/b", "."). A ".." component is refused outright rather than
// cleaned away: the caller meant to leave where it named.
func rel(p string) (string, error) {
	for _, part := range strings.Split(p, "/") {
		if part == ".." {
			return "", fmt.Errorf("path %q: \"..\" is not allowed: %w", p, errdefs.ErrInvalidArgument)
		}
	}
	if strings.ContainsRune(p, 0) {
		return "", fmt.Errorf("path %q: NUL byte: %w", p, errdefs.ErrInvalidArgument)
	}
	r := strings.TrimPrefix(path.Clean("/"+p), "/")
	if r == "" {
		r = "."
	}
	return r, nil
}

// classify gives an OS error its errdefs class: a missing path is
// ErrNotFound, an escape through a symlink ErrInvalidArgument, a full
// volume ErrResourceExhausted.
func classify(op, p string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s %s: %w", op, p, errdefs.ErrNotFound)
	case errors.Is(err, fs.ErrExist):
		return fmt.Errorf("%s %s: already exists: %w", op, p, errdefs.ErrAlreadyExists)
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return fmt.Errorf("%s %s: volume is full: %w", op, p, errdefs.ErrResourceExhausted)
	case errors.Is(err, syscall.ENOTDIR), errors.Is(err, syscall.EISDIR), errors.Is(err, syscall.ENOTEMPTY):
		return fmt.Errorf("%s %s: %v: %w", op, p, errors.Unwrap(err), errdefs.ErrInvalidArgument)
	case strings.Contains(err.Error(), "path escapes"):
		// os.Root's own error for a symlink leading out of the volume; it
		// has no exported value to test against.
		return fmt.Errorf("%s %s: path escapes the volume: %w", op, p, errdefs.ErrInvalidArgument)
	}
	return fmt.Errorf("%s %s: %w", op, p, err)
}

// Stat describes the entry at p without following a final symlink.
func (c *Content) Stat(p string) (Entry, error) {
	r, err := rel(p)
	if err != nil {
		return Entry{}, err
	}
	fi, err := c.root.Lstat(r)
	if err != nil {
		return Entry{}, classify("stat", p, err)
	}
	return c.entry(r, fi), nil
}

// entry converts fi, found at relative path r, into an Entry.
func (c *Content) entry(r string, fi fs.FileInfo) Entry {
	e := Entry{Name: fi.Name(), Path: "/" + r, Size: fi.Size(),
		Mode: uint32(fi.Mode().Perm()), Mtime: fi.ModTime().UTC(), Type: "unknown"}
	if r == "." {
		e.Name, e.Path = "", "/"
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		e.UID, e.GID = st.Uid, st.Gid
		e.Mode |= uint32(st.Mode) & 0o7000
		e.Atime = time.Unix(st.Atim.Sec, st.Atim.Nsec).UTC()
		e.Ctime = time.Unix(st.Ctim.Sec, st.Ctim.Nsec).UTC()
	}
	switch {
	case fi.Mode().IsRegular():
		e.Type = "file"
	case fi.IsDir():
		e.Type = "directory"
	case fi.Mode()&fs.ModeSymlink != 0:
		e.Type = "symlink"
		e.Target, _ = c.root.Readlink(r)
	}
	return e
}

// List returns the entries below directory p, depth levels deep (1: its
// children only), parents before their children.
func (c *Content) List(p string, depth int) ([]Entry, error) {
	r, err := rel(p)
	if err != nil {
		return nil, err
	}
	if depth < 1 {
		depth = 1
	}
	fi, err := c.root.Lstat(r)
	if err != nil {
		return nil, classify("list", p, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("list %s: not a directory: %w", p, errdefs.ErrInvalidArgument)
	}
	out := []Entry{}
	err = c.walk(r, depth, &out)
	return out, classify("list", p, err)
}

func (c *Content) walk(r string, depth int, out *[]Entry) error {
	f, err := c.root.Open(r)
	if err != nil {
		return err
	}
	ents, err := f.ReadDir(-1)
	f.Close()
	if err != nil {
		return err
	}
	for _, de := range ents {
		child := path.Join(r, de.Name())
		fi, err := c.root.Lstat(child)
		if err != nil {
			continue // gone meanwhile (a sandbox removed it)
		}
		*out = append(*out, c.entry(child, fi))
		if fi.IsDir() && depth > 1 {
			if err := c.walk(child, depth-1, out); err != nil {
				return err
			}
		}
	}
	return nil
}
