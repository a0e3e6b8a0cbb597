package images

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// Shared is what ShareUnchanged linked.
type Shared struct {
	Files int
	Bytes int64
}

// ShareUnchanged makes the files of layer dir that nothing changed since
// it was copied from parent hard links to parent's files, so a layer costs
// the disk of what its step changed. dir must be a copy of parent made
// before since (cp -a keeps sizes, modes, owners and times); a file counts
// as unchanged when its inode's change time is not after since — which no
// write, chmod, chown, utime or rename can leave so, and no process can
// set — and parent's file at the same path still matches it. Directory
// times are kept. Committed layers are never written again, so sharing
// their inodes is safe.
func ShareUnchanged(dir, parent string, since time.Time) (Shared, error) {
	var sh Shared
	dirTimes := map[string][2]time.Time{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		st, ok := statOf(p)
		if !ok || ctime(st).After(since) {
			return nil
		}
		pst, ok := statOf(filepath.Join(parent, rel))
		if !ok || !sameFile(st, pst) {
			return nil
		}
		if err := linkOver(filepath.Join(parent, rel), p, dirTimes); err != nil {
			if errors.Is(err, syscall.EXDEV) {
				return fs.SkipAll
			}
			return nil // EMLINK and the like: the copy stays
		}
		sh.Files++
		sh.Bytes += st.Size
		return nil
	})
	for d, t := range dirTimes {
		os.Chtimes(d, t[0], t[1])
	}
	return sh, err
}

// linkOver replaces p by a hard link to src, noting p's directory's times
// (the rename changes them) the first time.
func linkOver(src, p string, dirTimes map[string][2]time.Time) error {
	parentDir := filepath.Dir(p)
	if _, ok := dirTimes[parentDir]; !ok {
		dst, ok := statOf(parentDir)
		if !ok {
			return os.ErrNotExist
		}
		dirTimes[parentDir] = [2]time.Time{
			time.Unix(dst.Atim.Sec, dst.Atim.Nsec), time.Unix(dst.Mtim.Sec, dst.Mtim.Nsec),
		}
	}
	tmp := filepath.Join(parentDir, ".fbx-share-"+filepath.Base(p))
	os.Remove(tmp)
	if err := os.Link(src, tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, p); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

func statOf(p string) (*syscall.Stat_t, bool) {
	var st syscall.Stat_t
	if err := syscall.Lstat(p, &st); err != nil {
		return nil, false
	}
	return &st, true
}

func ctime(st *syscall.Stat_t) time.Time { return time.Unix(st.Ctim.Sec, st.Ctim.Nsec) }

// sameFile: both regular files with the same size, mode, owner and
// modification time, on one filesystem, and not one inode already.
func sameFile(a, b *syscall.Stat_t) bool {
	return a.Mode&syscall.S_IFMT == syscall.S_IFREG && a.Mode == b.Mode && a.Size == b.Size &&
		a.Uid == b.Uid && a.Gid == b.Gid && a.Mtim == b.Mtim && a.Dev == b.Dev && a.Ino != b.Ino
}
