package oci

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/forkbox/forkbox/internal/errdefs"
)

// ApplyOptions tunes ApplyLayer.
type ApplyOptions struct {
	// Untrusted marks the tar as user input (an uploaded build context)
	// rather than an image layer: no parent path may pass through a
	// symlink, whiteout names are plain names, device and FIFO nodes are
	// skipped, and owners, xattrs and the root's own metadata are not taken
	// from the tar (everything belongs to the caller).
	Untrusted bool
	// MaxBytes caps the regular-file content (0: no cap).
	MaxBytes int64
}

// ApplyStats counts what ApplyLayer did.
type ApplyStats struct {
	Files, Dirs, Symlinks, Hardlinks int
	Whiteouts                        int   // .wh. entries and opaque markers honoured
	Skipped                          int   // device nodes and entry types a rootfs does not take
	Bytes                            int64 // regular-file content written
}

// ApplyLayer extracts the tar stream r onto the directory root as an OCI
// layer: whiteouts (.wh.NAME) remove what lower layers put there, opaque
// markers (.wh..wh..opq) hide a directory's lower contents, entries replace
// what is in their way, and hard links, symlinks, modes (with setuid bits),
// owners, times and xattrs are kept; device nodes are skipped (a sandbox
// gets its own /dev).
//
// No entry can reach outside root: names that are absolute or climb above
// the root are refused, every parent directory is resolved by the kernel
// with root as "/" (openat2 RESOLVE_IN_ROOT, so symlinks in the tree — even
// absolute ones — resolve inside it, as they will in the sandbox), and the
// last component is always created or changed without following symlinks.
func ApplyLayer(ctx context.Context, root string, r io.Reader, opts ApplyOptions) (ApplyStats, error) {
	rootFd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return ApplyStats{}, fmt.Errorf("apply layer: open %s: %w", root, err)
	}
	defer unix.Close(rootFd)
	a := &applier{root: rootFd, opts: opts, entries: map[string]bool{}, ancestors: map[string]bool{},
		buf: make([]byte, 1<<20)}
	tr := tar.NewReader(r)
	for {
		if err := ctx.Err(); err != nil {
			return a.stats, err
		}
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return a.stats, fmt.Errorf("apply layer: bad tar: %v: %w", err, errdefs.ErrInvalidArgument)
		}
		if err := a.entry(hdr, tr); err != nil {
			return a.stats, fmt.Errorf("apply layer: entry %q: %w", hdr.Name, err)
		}
	}
	return a.stats, a.finishDirs()
}

// applier is the state of one ApplyLayer call.
type applier struct {
	root      int // O_PATH fd of the rootfs
	opts      ApplyOptions
	entries   map[string]bool // paths this layer wrote
	ancestors map[string]bool // proper ancestors of those
	dirs      []dirTimes      // directory times, set last (children change them)
	stats     ApplyStats
	buf       []byte
}

type dirTimes struct {
	path string
	ts   []unix.Timespec
}

// cleanName turns a tar name into a clean relative path, refusing names
// that are absolute or escape the root. "." is the root itself.
func cleanName(name string) (string, error) {
	if name == "" {
		return "", fmt.Errorf("empty name: %w", errdefs.ErrInvalidArgument)
	}
	if strings.HasPrefix(name, "/") {
		return "", fmt.Errorf("absolute path refused: %w", errdefs.ErrInvalidArgument)
	}
	c := path.Clean(name)
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", fmt.Errorf("path escapes the root: %w", errdefs.ErrInvalidArgument)
	}
	return c, nil
}

func (a *applier) entry(hdr *tar.Header, r io.Reader) error {
	p, err := cleanName(hdr.Name)
	if err != nil {
		return err
	}
	switch hdr.Typeflag {
	case tar.TypeXGlobalHeader:
		return nil
	case tar.TypeChar, tar.TypeBlock:
		a.stats.Skipped++
		return nil
	case tar.TypeFifo:
		if a.opts.Untrusted {
			a.stats.Skipped++
			return nil
		}
	}
	if p == "." {
		return a.rootEntry(hdr)
	}
	dir, base := path.Dir(p), path.Base(p)
	if !a.opts.Untrusted && strings.HasPrefix(base, whiteoutPrefix) {
		a.stats.Whiteouts++
		return a.whiteout(dir, base)
	}
	pfd, err := a.openDir(dir, true)
	if err != nil {
		return err
	}
	defer unix.Close(pfd)
	if err := a.create(pfd, p, base, hdr, r); err != nil {
		return err
	}
	a.mark(p)
	return nil
}

// create makes the node of one entry in the directory pfd.
func (a *applier) create(pfd int, p, base string, hdr *tar.Header, r io.Reader) error {
	switch hdr.Typeflag {
	case tar.TypeDir:
		a.stats.Dirs++
		return a.mkdir(pfd, p, base, hdr)
	case tar.TypeReg, tar.TypeRegA: //nolint:staticcheck // old archives still use TypeRegA
		a.stats.Files++
		return a.file(pfd, base, hdr, r)
	case tar.TypeSymlink:
		a.stats.Symlinks++
		return a.symlink(pfd, base, hdr)
	case tar.TypeLink:
		a.stats.Hardlinks++
		return a.hardlink(pfd, base, hdr)
	case tar.TypeFifo:
		return a.fifo(pfd, base, hdr)
	default:
		a.stats.Skipped++
		return nil
	}
}

// mark records p (and its ancestors) as written by this layer, so opaque
// markers and whiteouts of the same layer leave them alone.
func (a *applier) mark(p string) {
	a.entries[p] = true
	for d := path.Dir(p); d != "." && !a.ancestors[d]; d = path.Dir(d) {
		a.ancestors[d] = true
	}
}

// resolveFlags are the openat2 rules for parent directories.
func (a *applier) resolveFlags() uint64 {
	f := uint64(unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV)
	if a.opts.Untrusted {
		f |= unix.RESOLVE_NO_SYMLINKS
	}
	return f
}

// openDir returns an O_PATH fd of the directory p (relative to the root,
// resolved inside it), creating missing directories (0755) when create is set.
func (a *applier) openDir(p string, create bool) (int, error) {
	how := unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: a.resolveFlags()}
	for try := 0; ; try++ {
		fd, err := unix.Openat2(a.root, p, &how)
		switch {
		case err == nil:
			return fd, nil
		case err == unix.EAGAIN && try < 8:
			continue
		case err == unix.ELOOP && a.opts.Untrusted:
			return -1, fmt.Errorf("directory %q goes through a symlink: refused: %w", p, errdefs.ErrInvalidArgument)
		case err == unix.EXDEV:
			return -1, fmt.Errorf("directory %q leaves the root: refused: %w", p, errdefs.ErrInvalidArgument)
		case err == unix.ENOTDIR:
			return -1, fmt.Errorf("directory %q: a component is not a directory: %w", p, errdefs.ErrInvalidArgument)
		case err == unix.ENOENT && create && p != ".":
			if err := a.mkdirParent(p); err != nil {
				return -1, err
			}
			create = false
		default:
			return -1, fmt.Errorf("open directory %q: %w", p, err)
		}
	}
}

// mkdirParent creates the missing directory p, which a tar may imply
// without an entry of its own.
func (a *applier) mkdirParent(p string) error {
	pfd, err := a.openDir(path.Dir(p), true)
	if err != nil {
		return err
	}
	defer unix.Close(pfd)
	err = unix.Mkdirat(pfd, path.Base(p), 0o755)
	if err == unix.EEXIST {
		return nil // a dangling symlink, say; resolving p again reports it
	}
	if err != nil {
		return fmt.Errorf("mkdir %q: %w", p, err)
	}
	// Undo the umask.
	if err := chmodAt(pfd, path.Base(p), 0o755); err != nil {
		return fmt.Errorf("chmod %q: %w", p, err)
	}
	a.mark(p)
	return nil
}

func (a *applier) mkdir(pfd int, p, base string, hdr *tar.Header) error {
	err := unix.Mkdirat(pfd, base, 0o700)
	if err == unix.EEXIST {
		var st unix.Stat_t
		if err := unix.Fstatat(pfd, base, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return fmt.Errorf("stat: %w", err)
		}
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			if err := removeAllAt(pfd, base); err != nil {
				return err
			}
			err = unix.Mkdirat(pfd, base, 0o700)
		} else {
			err = nil // an existing directory keeps its contents
		}
	}
	if err != nil {
		return fmt.Errorf("mkdir: %w", err)
	}
	if err := a.meta(pfd, base, hdr, false); err != nil {
		return err
	}
	a.dirs = append(a.dirs, dirTimes{path: p, ts: times(hdr)})
	return nil
}

func (a *applier) file(pfd int, base string, hdr *tar.Header, r io.Reader) error {
	if a.opts.MaxBytes > 0 && a.stats.Bytes+hdr.Size > a.opts.MaxBytes {
		return fmt.Errorf("content exceeds the limit of %d bytes: %w", a.opts.MaxBytes, errdefs.ErrInvalidArgument)
	}
	flags := unix.O_WRONLY | unix.O_CREAT | unix.O_EXCL | unix.O_NOFOLLOW | unix.O_CLOEXEC
	fd, err := unix.Openat(pfd, base, flags, 0o600)
	if err == unix.EEXIST {
		if err := removeAllAt(pfd, base); err != nil {
			return err
		}
		fd, err = unix.Openat(pfd, base, flags, 0o600)
	}
	if err != nil {
		return fmt.Errorf("create: %w", err)
	}
	n, err := io.CopyBuffer(fdWriter(fd), r, a.buf)
	a.stats.Bytes += n
	if cerr := unix.Close(fd); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write: %w", err)
	}
	return a.meta(pfd, base, hdr, false)
}

// fdWriter writes to a raw fd; it hides os.File's ReadFrom so CopyBuffer
// uses the applier's large buffer.
type fdWriter int

func (w fdWriter) Write(b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, err := unix.Write(int(w), b[n:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return n, err
		}
		n += m
	}
	return n, nil
}

func (a *applier) symlink(pfd int, base string, hdr *tar.Header) error {
	if hdr.Linkname == "" {
		return fmt.Errorf("symlink without a target: %w", errdefs.ErrInvalidArgument)
	}
	err := unix.Symlinkat(hdr.Linkname, pfd, base)
	if err == unix.EEXIST {
		if err := removeAllAt(pfd, base); err != nil {
			return err
		}
		err = unix.Symlinkat(hdr.Linkname, pfd, base)
	}
	if err != nil {
		return fmt.Errorf("symlink: %w", err)
	}
	return a.meta(pfd, base, hdr, true)
}

func (a *applier) hardlink(pfd int, base string, hdr *tar.Header) error {
	target, err := cleanName(hdr.Linkname)
	if err != nil {
		return fmt.Errorf("hard link target %q: %w", hdr.Linkname, err)
	}
	if target == "." {
		return fmt.Errorf("hard link to the root: %w", errdefs.ErrInvalidArgument)
	}
	tfd, err := a.openDir(path.Dir(target), false)
	if err != nil {
		return fmt.Errorf("hard link target %q: %w", hdr.Linkname, err)
	}
	defer unix.Close(tfd)
	tbase := path.Base(target)
	err = unix.Linkat(tfd, tbase, pfd, base, 0)
	if err == unix.EEXIST {
		if sameInode(tfd, tbase, pfd, base) {
			return nil
		}
		if err := removeAllAt(pfd, base); err != nil {
			return err
		}
		err = unix.Linkat(tfd, tbase, pfd, base, 0)
	}
	if err != nil {
		return fmt.Errorf("hard link to %q: %w", hdr.Linkname, err)
	}
	return nil
}

func (a *applier) fifo(pfd int, base string, hdr *tar.Header) error {
	err := unix.Mknodat(pfd, base, unix.S_IFIFO|0o600, 0)
	if err == unix.EEXIST {
		if err := removeAllAt(pfd, base); err != nil {
			return err
		}
		err = unix.Mknodat(pfd, base, unix.S_IFIFO|0o600, 0)
	}
	if err != nil {
		return fmt.Errorf("mkfifo: %w", err)
	}
	return a.meta(pfd, base, hdr, false)
}

// rootEntry applies the metadata of the archive's "." entry to the root.
func (a *applier) rootEntry(hdr *tar.Header) error {
	if hdr.Typeflag != tar.TypeDir {
		return fmt.Errorf("the root must be a directory: %w", errdefs.ErrInvalidArgument)
	}
	if a.opts.Untrusted {
		return nil
	}
	proc := fmt.Sprintf("/proc/self/fd/%d", a.root)
	if err := unix.Fchownat(a.root, "", hdr.Uid, hdr.Gid, unix.AT_EMPTY_PATH); err != nil {
		return fmt.Errorf("chown root: %w", err)
	}
	if err := unix.Chmod(proc, uint32(hdr.Mode)&0o7777); err != nil {
		return fmt.Errorf("chmod root: %w", err)
	}
	return nil
}

// whiteout honours a .wh. entry in dir: it removes what lower layers put
// under the name, or (opaque marker) everything lower layers put in dir.
func (a *applier) whiteout(dir, base string) error {
	if base == opaqueMarker {
		return a.opaque(dir)
	}
	name := strings.TrimPrefix(base, whiteoutPrefix)
	if name == "" || name == "." || name == ".." || strings.HasPrefix(name, whiteoutPrefix) {
		return fmt.Errorf("bad whiteout name: %w", errdefs.ErrInvalidArgument)
	}
	target := path.Join(dir, name)
	if a.entries[target] || a.ancestors[target] {
		return nil // a whiteout hides lower layers only, not its own layer
	}
	pfd, err := a.openDir(dir, false)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return err
	}
	defer unix.Close(pfd)
	return removeAllAt(pfd, name)
}

// Whiteout names of the OCI image layer format.
const (
	whiteoutPrefix = ".wh."
	opaqueMarker   = ".wh..wh..opq"
)
