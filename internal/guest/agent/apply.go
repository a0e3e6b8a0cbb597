package agent

import (
	"archive/tar"
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/pkg/xattr"
	"golang.org/x/sys/unix"

	"github.com/forkbox/forkbox/internal/fsdiff"
)

// POST /forkbox/apply takes a change set (internal/fsdiff's wire format:
// deletions, then entries to write, with mode, owner and user.* xattrs)
// and applies it all or nothing. Nothing touches the tree until the whole
// stream is staged (contents written under a staging directory on the
// root); then each change is moved into place, what it replaces moved
// aside beside it, and a failure moves everything back.

// errBadChangeSet marks a stream that is not a change set (400); other
// failures are the sandbox's files refusing it (409).
var errBadChangeSet = errors.New("bad change set")

// applyKind is what one staged change does.
type applyKind int

const (
	applyDelete applyKind = iota
	applyDir
	applyPut
)

// stagedChange is one change, its content (applyPut) already staged.
type stagedChange struct {
	kind   applyKind
	path   string // the target, inside the root
	staged string // applyPut: the staged entry
	hdr    *tar.Header
}

// applyRun is one apply: its staging directory and undo log.
type applyRun struct {
	root, stage, token string
	changes            []stagedChange
	undo               []func() error
	backups            []string
	n                  int
}

func (a *Agent) handleApply(w http.ResponseWriter, r *http.Request) {
	root := a.applyRoot
	start := time.Now()
	run, err := stageChanges(root, r.Body)
	staged := time.Now()
	if run != nil {
		defer os.RemoveAll(run.stage)
	}
	if err != nil {
		code := http.StatusConflict // the sandbox's files refused it (no space, ...)
		if errors.Is(err, errBadChangeSet) {
			code = http.StatusBadRequest
		}
		writeApplyError(w, code, fmt.Errorf("stage changes: %w", err))
		return
	}
	if err := run.commit(); err != nil {
		if uerr := run.rollback(); uerr != nil {
			a.log.Error("apply: undo failed", "err", uerr)
			err = errors.Join(err, uerr)
		}
		writeApplyError(w, http.StatusConflict, err)
		return
	}
	committed := time.Now()
	run.dropBackups()
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"applied": len(run.changes),
		"stageMs": staged.Sub(start).Milliseconds(), "commitMs": committed.Sub(staged).Milliseconds(),
		"cleanMs": time.Since(committed).Milliseconds()})
}

func writeApplyError(w http.ResponseWriter, code int, err error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(map[string]string{"message": err.Error()})
}

// stageChanges reads the change set, staging contents under root.
func stageChanges(root string, body io.Reader) (*applyRun, error) {
	tok := make([]byte, 6)
	rand.Read(tok)
	run := &applyRun{root: root, token: hex.EncodeToString(tok)}
	run.stage = filepath.Join(root, ".forkbox-apply-"+run.token)
	if err := os.Mkdir(run.stage, 0o700); err != nil {
		return nil, err
	}
	w := newStagers()
	err := run.read(tar.NewReader(bufio.NewReaderSize(body, 256<<10)), w)
	if werr := w.wait(); err == nil {
		err = werr
	}
	return run, err
}

// read stages each entry of the change set, small files through w.
func (run *applyRun) read(tr *tar.Reader, w *stagers) error {
	for i := 0; ; i++ {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%w: %v", errBadChangeSet, err)
		}
		p, ok := fsdiff.CleanPath(hdr.Name)
		if !ok || p == "/" {
			return fmt.Errorf("%w: path %q is outside the root", errBadChangeSet, hdr.Name)
		}
		c := stagedChange{path: filepath.Join(run.root, p), hdr: hdr}
		switch {
		case fsdiff.IsWhiteout(hdr):
			c.kind = applyDelete
		case hdr.Typeflag == tar.TypeDir:
			c.kind = applyDir
		case hdr.Typeflag == tar.TypeReg && hdr.Size <= maxQueuedFile:
			c.kind, c.staged = applyPut, filepath.Join(run.stage, fmt.Sprint(i))
			data := make([]byte, hdr.Size)
			if _, err := io.ReadFull(tr, data); err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
			if err := w.add(p, c.staged, hdr, data); err != nil {
				return err
			}
		default:
			c.kind, c.staged = applyPut, filepath.Join(run.stage, fmt.Sprint(i))
			if err := stageEntry(c.staged, hdr, tr); err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
		}
		run.changes = append(run.changes, c)
	}
}

// stageEntry creates hdr's entry at file with its metadata.
func stageEntry(file string, hdr *tar.Header, r io.Reader) error {
	switch hdr.Typeflag {
	case tar.TypeReg:
		return stageFile(file, hdr, r)
	case tar.TypeSymlink:
		if err := os.Symlink(hdr.Linkname, file); err != nil {
			return err
		}
	case tar.TypeFifo:
		if err := syscall.Mkfifo(file, 0o600); err != nil {
			return err
		}
	default:
		return fmt.Errorf("cannot apply tar type %q", hdr.Typeflag)
	}
	return setMeta(file, hdr)
}

// stageFile writes a regular file and its metadata through one file
// descriptor with plain system calls: each call costs in gVisor, and an
// os.File adds its poller's (a new file has no xattrs to clear either).
func stageFile(file string, hdr *tar.Header, r io.Reader) error {
	fd, err := unix.Open(file, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return &os.PathError{Op: "create", Path: file, Err: err}
	}
	err = writeAll(fd, r)
	if err == nil && (hdr.Uid != os.Getuid() || hdr.Gid != os.Getgid()) {
		err = unix.Fchown(fd, hdr.Uid, hdr.Gid)
	}
	if err == nil {
		err = unix.Fchmod(fd, uint32(hdr.Mode&0o7777))
	}
	for k, v := range fsdiff.XattrsOf(hdr) {
		if err == nil {
			err = unix.Fsetxattr(fd, k, []byte(v), 0)
		}
	}
	if cerr := unix.Close(fd); err == nil {
		err = cerr
	}
	if err != nil {
		return &os.PathError{Op: "stage", Path: file, Err: err}
	}
	return nil
}

// writeAll copies r to fd: a whole small file in one write.
func writeAll(fd int, r io.Reader) error {
	if br, ok := r.(*bytes.Reader); ok && br.Len() <= maxQueuedFile {
		b := make([]byte, br.Len())
		br.Read(b)
		return writeFull(fd, b)
	}
	buf := make([]byte, 256<<10)
	for {
		n, err := r.Read(buf)
		if werr := writeFull(fd, buf[:n]); werr != nil {
			return werr
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

func writeFull(fd int, b []byte) error {
	for len(b) > 0 {
		n, err := unix.Write(fd, b)
		if err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

// setMeta gives file hdr's owner, mode and exactly its user.* xattrs
// (a symlink takes only the owner: Linux keeps no user xattrs on links).
func setMeta(file string, hdr *tar.Header) error {
	if err := os.Lchown(file, hdr.Uid, hdr.Gid); err != nil {
		return err
	}
	if hdr.Typeflag == tar.TypeSymlink {
		return nil
	}
	if err := os.Chmod(file, tarMode(hdr.Mode)); err != nil {
		return err
	}
	return setUserXattrs(file, fsdiff.XattrsOf(hdr))
}

// tarMode converts a tar mode (with setuid, setgid, sticky) to Go's.
func tarMode(m int64) os.FileMode {
	mode := os.FileMode(m & 0o777)
	if m&0o4000 != 0 {
		mode |= os.ModeSetuid
	}
	if m&0o2000 != 0 {
		mode |= os.ModeSetgid
	}
	if m&0o1000 != 0 {
		mode |= os.ModeSticky
	}
	return mode
}

// setUserXattrs makes want file's whole set of user.* attributes.
func setUserXattrs(file string, want map[string]string) error {
	names, err := xattr.LList(file)
	if xattrUnsupported(err) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, n := range names {
		if _, keep := want[n]; strings.HasPrefix(n, "user.") && !keep {
			if err := xattr.LRemove(file, n); err != nil && !errors.Is(err, xattr.ENOATTR) {
				return err
			}
		}
	}
	for k, v := range want {
		if err := xattr.LSet(file, k, []byte(v)); err != nil {
			return err
		}
	}
	return nil
}
