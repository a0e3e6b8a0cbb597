package images

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/forkbox/forkbox/internal/errdefs"
)

// manifest is an image in the object store: its files in walk order
// (a directory before what it holds), each regular file naming its blob.
// It holds no ref, so a linked image's manifest is the same bytes and the
// two share one cache entry.
type manifest struct {
	Version int         `json:"v"`
	Files   []fileEntry `json:"files"`
}

// fileEntry is one file of an image, with what a root filesystem needs
// kept: type, permission bits (setuid included), owner, modification time.
type fileEntry struct {
	Path   string `json:"p"`
	Type   string `json:"t"` // dir, file, symlink, node (device, fifo, socket)
	Mode   uint32 `json:"m"` // st_mode (type and permission bits)
	UID    uint32 `json:"u"`
	GID    uint32 `json:"g"`
	MTime  int64  `json:"mt"` // nanoseconds since the epoch
	Size   int64  `json:"s,omitempty"`
	SHA256 string `json:"h,omitempty"`
	Target string `json:"l,omitempty"`
	Rdev   uint64 `json:"r,omitempty"`
}

func blobKey(sum string) string { return "blobs/sha256/" + sum }

// size is what the image takes on disk (its files' bytes).
func (m *manifest) size() int64 {
	var n int64
	for _, f := range m.Files {
		n += f.Size
	}
	return n
}

// blobs lists the distinct digests the manifest names.
func (m *manifest) blobs() []string {
	var out []string
	seen := map[string]bool{}
	for _, f := range m.Files {
		if f.Type == "file" && !seen[f.SHA256] {
			seen[f.SHA256] = true
			out = append(out, f.SHA256)
		}
	}
	return out
}

func parseManifest(data []byte) (*manifest, error) {
	var m manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("object store: a manifest does not parse: %v: %w", err, errdefs.ErrInternal)
	}
	for _, f := range m.Files {
		if !filepath.IsLocal(filepath.FromSlash(f.Path)) {
			return nil, fmt.Errorf("object store: a manifest names path %q outside the image: %w", f.Path, errdefs.ErrInternal)
		}
		if f.Type == "file" && (len(f.SHA256) != 64 || !isHex(f.SHA256)) {
			return nil, fmt.Errorf("object store: a manifest names blob %q: %w", f.SHA256, errdefs.ErrInternal)
		}
	}
	return &m, nil
}

func isHex(s string) bool {
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// scanDir describes dir's tree as a manifest, hashing every regular file
// (streamed: a file is never read whole into memory).
func scanDir(dir string) (*manifest, error) {
	m := &manifest{Version: 1}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "." {
			return err
		}
		var st syscall.Stat_t
		if err := syscall.Lstat(p, &st); err != nil {
			return err
		}
		e := fileEntry{Path: filepath.ToSlash(rel), Mode: st.Mode, UID: st.Uid, GID: st.Gid,
			MTime: st.Mtim.Sec*1e9 + st.Mtim.Nsec}
		switch st.Mode & syscall.S_IFMT {
		case syscall.S_IFDIR:
			e.Type = "dir"
		case syscall.S_IFREG:
			e.Type, e.Size = "file", st.Size
			if e.SHA256, err = HashFile(p); err != nil {
				return err
			}
		case syscall.S_IFLNK:
			e.Type = "symlink"
			if e.Target, err = os.Readlink(p); err != nil {
				return err
			}
		default:
			e.Type, e.Rdev = "node", st.Rdev
		}
		m.Files = append(m.Files, e)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return m, nil
}

// HashFile is the hex sha256 of file p's content.
func HashFile(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// makeTree creates m's directories, links and nodes under dir (regular
// files are downloaded separately, then settle gives everything its owner,
// mode and time).
func makeTree(dir string, m *manifest) error {
	for _, f := range m.Files {
		p := filepath.Join(dir, filepath.FromSlash(f.Path))
		var err error
		switch f.Type {
		case "dir":
			err = os.Mkdir(p, 0o700)
		case "symlink":
			err = os.Symlink(f.Target, p)
		case "node":
			err = syscall.Mknod(p, f.Mode, int(f.Rdev))
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// settle gives every file its owner, permission bits and modification
// time, directories last and deepest first (creating a file changes its
// directory's time).
func settle(dir string, m *manifest) error {
	files := slices.Clone(m.Files)
	slices.Reverse(files)
	for _, f := range files {
		p := filepath.Join(dir, filepath.FromSlash(f.Path))
		if err := os.Lchown(p, int(f.UID), int(f.GID)); err != nil {
			return err
		}
		if f.Type != "symlink" {
			// After chown, which clears setuid bits.
			if err := syscall.Chmod(p, f.Mode&0o7777); err != nil {
				return err
			}
		}
		ts := []unix.Timespec{unix.NsecToTimespec(f.MTime), unix.NsecToTimespec(f.MTime)}
		if err := lutimes(p, ts); err != nil {
			return err
		}
	}
	return nil
}

// lutimes sets a file's times without following a symbolic link.
func lutimes(p string, ts []unix.Timespec) error {
	return unix.UtimesNanoAt(unix.AT_FDCWD, p, ts, unix.AT_SYMLINK_NOFOLLOW)
}
