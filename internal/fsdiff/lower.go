package fsdiff

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/pkg/xattr"
)

// Lower is a read-only tree on the host: a template's root filesystem.
// Paths are resolved inside it without following its symlinks, so a link
// in the template never reaches the host's own files.
type Lower struct {
	dir string
	// dirs caches whether a path is a real directory of the tree.
	dirs map[string]bool
}

// NewLower returns the lower tree rooted at host directory dir.
func NewLower(dir string) (*Lower, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("lower %s is not a directory", dir)
	}
	return &Lower{dir: dir, dirs: map[string]bool{"/": true}}, nil
}

// Dir is the host directory the tree is rooted at.
func (lw *Lower) Dir() string { return lw.dir }

// isDir reports whether p (clean, absolute) is a directory reached through
// directories only.
func (lw *Lower) isDir(p string) bool {
	if d, ok := lw.dirs[p]; ok {
		return d
	}
	d := lw.isDir(path.Dir(p))
	if d {
		fi, err := os.Lstat(lw.host(p))
		d = err == nil && fi.IsDir()
	}
	lw.dirs[p] = d
	return d
}

func (lw *Lower) host(p string) string { return filepath.Join(lw.dir, filepath.FromSlash(p)) }

// Lookup returns the entry at p, nil if there is none.
func (lw *Lower) Lookup(p string) (*Entry, error) {
	if lw == nil || p == "/" || !lw.isDir(path.Dir(p)) {
		return nil, nil
	}
	hp := lw.host(p)
	fi, err := os.Lstat(hp)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return hostEntry(hp, fi)
}

// hostEntry describes host file hp.
func hostEntry(hp string, fi fs.FileInfo) (*Entry, error) {
	e := &Entry{Mode: uint32(fi.Mode().Perm())}
	m := fi.Mode()
	if m&fs.ModeSetuid != 0 {
		e.Mode |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		e.Mode |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		e.Mode |= 0o1000
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		e.UID, e.GID = int(st.Uid), int(st.Gid)
		e.host = &hostID{dev: uint64(st.Dev), ino: st.Ino, mtime: fi.ModTime().UnixNano()}
		if m&(fs.ModeDevice|fs.ModeCharDevice) != 0 {
			e.Dev = fmt.Sprintf("%d:%d", unixMajor(st.Rdev), unixMinor(st.Rdev))
		}
	}
	switch {
	case m.IsRegular():
		e.Type, e.Size, e.src = TypeFile, fi.Size(), hostSource(hp)
	case m.IsDir():
		e.Type = TypeDir
	case m&fs.ModeSymlink != 0:
		link, err := os.Readlink(hp)
		if err != nil {
			return nil, err
		}
		e.Type, e.Link = TypeSymlink, link
	case m&fs.ModeNamedPipe != 0:
		e.Type = TypeFifo
	case m&fs.ModeCharDevice != 0:
		e.Type = TypeChar
	case m&fs.ModeDevice != 0:
		e.Type = TypeBlock
	default:
		return nil, nil // sockets: a tar of the sandbox skips them too
	}
	return e, userXattrs(hp, e)
}

// userXattrs reads hp's user.* attributes into e.
func userXattrs(hp string, e *Entry) error {
	names, err := xattr.LList(hp)
	if err != nil {
		if errors.Is(err, syscall.ENOTSUP) || errors.Is(err, syscall.EPERM) {
			return nil
		}
		return err
	}
	for _, n := range names {
		if !strings.HasPrefix(n, userXattrPfx) {
			continue
		}
		v, err := xattr.LGet(hp, n)
		if err != nil {
			return err
		}
		if e.Xattrs == nil {
			e.Xattrs = map[string]string{}
		}
		e.Xattrs[n] = string(v)
	}
	return nil
}

func unixMajor(dev uint64) uint64 { return (dev >> 8) & 0xfff }
func unixMinor(dev uint64) uint64 { return (dev & 0xff) | ((dev >> 12) & 0xfff00) }

// Walk calls fn for every path below p (not p itself), in lexical order,
// without following symlinks.
func (lw *Lower) Walk(p string, fn func(p string) error) error {
	if lw == nil || !lw.isDir(p) {
		return nil
	}
	base := lw.host(p)
	return filepath.WalkDir(base, func(hp string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if hp == base {
			return nil
		}
		rel, err := filepath.Rel(lw.dir, hp)
		if err != nil {
			return err
		}
		return fn("/" + filepath.ToSlash(rel))
	})
}

type hostSource string

func (s hostSource) open() (readCloser, error) { return os.Open(string(s)) }
