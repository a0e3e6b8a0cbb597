package agent

import (
	"archive/tar"
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

	"github.com/forkbox/forkbox/internal/fsdiff"
)

// POST /forkbox/apply takes a change set (internal/fsdiff's wire format:
// deletions, then entries to write, with mode, owner and user.* xattrs)
// and applies it all or nothing. Nothing touches the tree until the whole
// stream is staged (contents written under a staging directory on the
// root); then each change is moved into place, what it replaces moved
// aside beside it, and a failure moves everything back.

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
		writeApplyError(w, http.StatusBadRequest, fmt.Errorf("stage changes: %w", err))
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
	tr := tar.NewReader(body)
	for i := 0; ; i++ {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return run, nil
		}
		if err != nil {
			return run, err
		}
		p, ok := fsdiff.CleanPath(hdr.Name)
		if !ok || p == "/" {
			return run, fmt.Errorf("path %q is outside the root", hdr.Name)
		}
		c := stagedChange{path: filepath.Join(root, p), hdr: hdr}
		switch {
		case fsdiff.IsWhiteout(hdr):
			c.kind = applyDelete
		case hdr.Typeflag == tar.TypeDir:
			c.kind = applyDir
		default:
			c.kind, c.staged = applyPut, filepath.Join(run.stage, fmt.Sprint(i))
			if err := stageEntry(c.staged, hdr, tr); err != nil {
				return run, fmt.Errorf("%s: %w", p, err)
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

// stageFile writes a regular file and its metadata through one open file
// (a path walk per call costs in gVisor, and a new file has no xattrs to
// clear).
func stageFile(file string, hdr *tar.Header, r io.Reader) error {
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, r)
	if err == nil && (hdr.Uid != os.Getuid() || hdr.Gid != os.Getgid()) {
		err = f.Chown(hdr.Uid, hdr.Gid)
	}
	if err == nil {
		err = f.Chmod(tarMode(hdr.Mode))
	}
	for k, v := range fsdiff.XattrsOf(hdr) {
		if err == nil {
			err = xattr.FSet(f, k, []byte(v))
		}
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
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
