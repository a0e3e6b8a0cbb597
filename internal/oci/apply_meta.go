package oci

import (
	"archive/tar"
	"errors"
	"fmt"
	"os"
	"path"
	"strings"

	"golang.org/x/sys/unix"
)

// xattrPrefix marks the PAX records that carry extended attributes.
const xattrPrefix = "SCHILY.xattr."

// meta sets owner, mode, xattrs and (except for directories, which get
// theirs last) times on the node base in pfd, never following a symlink.
func (a *applier) meta(pfd int, base string, hdr *tar.Header, isLink bool) error {
	if !a.opts.Untrusted {
		if err := unix.Fchownat(pfd, base, hdr.Uid, hdr.Gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return fmt.Errorf("chown: %w", err)
		}
	}
	// After chown, which clears setuid/setgid bits.
	if !isLink {
		if err := chmodAt(pfd, base, uint32(hdr.Mode)&0o7777); err != nil {
			return fmt.Errorf("chmod: %w", err)
		}
	}
	if !a.opts.Untrusted {
		if err := setXattrs(pfd, base, hdr); err != nil {
			return err
		}
	}
	if hdr.Typeflag == tar.TypeDir {
		return nil
	}
	if err := unix.UtimesNanoAt(pfd, base, times(hdr), unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("set times: %w", err)
	}
	return nil
}

// chmodAt changes the mode of base without following a symlink.
func chmodAt(pfd int, base string, mode uint32) error {
	err := unix.Fchmodat(pfd, base, mode, unix.AT_SYMLINK_NOFOLLOW)
	if !errors.Is(err, unix.ENOSYS) {
		return err
	}
	// No fchmodat2: chmod the node an O_PATH|O_NOFOLLOW fd holds, which
	// is never a symlink's target.
	fd, err := unix.Openat(pfd, base, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return unix.Chmod(fmt.Sprintf("/proc/self/fd/%d", fd), mode)
}

// setXattrs sets the xattrs of the entry. One the file system cannot hold
// (no support, or user.* on a symlink) is dropped, as tar does.
func setXattrs(pfd int, base string, hdr *tar.Header) error {
	for k, v := range hdr.PAXRecords {
		attr, ok := strings.CutPrefix(k, xattrPrefix)
		if !ok {
			continue
		}
		// The fd's magic link names the (already resolved) parent; base has
		// no slash and lsetxattr does not follow it.
		p := fmt.Sprintf("/proc/self/fd/%d/%s", pfd, base)
		err := unix.Lsetxattr(p, attr, []byte(v), 0)
		switch {
		case err == nil:
		case errors.Is(err, unix.ENOTSUP), errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, unix.EPERM):
		default:
			return fmt.Errorf("set xattr %s: %w", attr, err)
		}
	}
	return nil
}

// times is the atime/mtime pair of an entry (atime defaults to mtime).
func times(hdr *tar.Header) []unix.Timespec {
	at := hdr.AccessTime
	if at.IsZero() {
		at = hdr.ModTime
	}
	return []unix.Timespec{unix.NsecToTimespec(at.UnixNano()), unix.NsecToTimespec(hdr.ModTime.UnixNano())}
}

// finishDirs sets the directories' times once their children are written.
func (a *applier) finishDirs() error {
	for i := len(a.dirs) - 1; i >= 0; i-- {
		d := a.dirs[i]
		pfd, err := a.openDir(path.Dir(d.path), false)
		if errors.Is(err, unix.ENOENT) {
			continue // removed by a later entry
		}
		if err != nil {
			return err
		}
		err = unix.UtimesNanoAt(pfd, path.Base(d.path), d.ts, unix.AT_SYMLINK_NOFOLLOW)
		unix.Close(pfd)
		if err != nil && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("set times of %q: %w", d.path, err)
		}
	}
	return nil
}

// opaque removes what lower layers put in dir, keeping what this layer
// wrote there (entries may come before or after the marker).
func (a *applier) opaque(dir string) error {
	fd, err := a.openDir(dir, false)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return a.opaqueIn(fd, dir)
}

func (a *applier) opaqueIn(dirfd int, dir string) error {
	names, err := readDirNames(dirfd, ".")
	if err != nil {
		return err
	}
	for _, n := range names {
		p := path.Join(dir, n)
		if !a.entries[p] && !a.ancestors[p] {
			if err := removeAllAt(dirfd, n); err != nil {
				return err
			}
			continue
		}
		var st unix.Stat_t
		if err := unix.Fstatat(dirfd, n, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return fmt.Errorf("stat %q: %w", p, err)
		}
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			continue
		}
		// A directory this layer wrote into may still hold lower children.
		cfd, err := unix.Openat(dirfd, n, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("open %q: %w", p, err)
		}
		err = a.opaqueIn(cfd, p)
		unix.Close(cfd)
		if err != nil {
			return err
		}
	}
	return nil
}

// readDirNames lists the directory name in dirfd (without following a
// symlink at name).
func readDirNames(dirfd int, name string) ([]string, error) {
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open directory %q: %w", name, err)
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, fmt.Errorf("read directory %q: %w", name, err)
	}
	return names, nil
}

// removeAllAt removes name in dirfd and, if it is a directory, everything
// under it, working through fds so no symlink is ever followed.
func removeAllAt(dirfd int, name string) error {
	var st unix.Stat_t
	if err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		return fmt.Errorf("stat %q: %w", name, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		if err := unix.Unlinkat(dirfd, name, 0); err != nil && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("remove %q: %w", name, err)
		}
		return nil
	}
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open %q: %w", name, err)
	}
	names, err := readDirNames(fd, ".")
	if err == nil {
		for _, n := range names {
			if err = removeAllAt(fd, n); err != nil {
				break
			}
		}
	}
	unix.Close(fd)
	if err != nil {
		return err
	}
	if err := unix.Unlinkat(dirfd, name, unix.AT_REMOVEDIR); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("remove directory %q: %w", name, err)
	}
	return nil
}

// sameInode reports whether two names are links of one inode.
func sameInode(dfd1 int, n1 string, dfd2 int, n2 string) bool {
	var a, b unix.Stat_t
	if unix.Fstatat(dfd1, n1, &a, unix.AT_SYMLINK_NOFOLLOW) != nil ||
		unix.Fstatat(dfd2, n2, &b, unix.AT_SYMLINK_NOFOLLOW) != nil {
		return false
	}
	return a.Dev == b.Dev && a.Ino == b.Ino
}
