package agent

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"connectrpc.com/connect"

	fspb "github.com/forkbox/forkbox/api/gen/filesystem"
)

// filesystemService implements filesystem.Filesystem. Every operation runs
// with the acting user's rights (asAccount): the user decides where
// relative paths start, what may be read or changed, and owns what it
// creates. A permission error answers CodePermissionDenied.
type filesystemService struct {
	a *Agent
}

// pathFor resolves a request path for the request's acting user.
func (s *filesystemService) pathFor(h connectHeader, p string) (string, *account, error) {
	acct, err := s.a.requestAccount(h.Header())
	if err != nil {
		return "", nil, connect.NewError(connect.CodeUnauthenticated, err)
	}
	return s.a.resolvePath(p, acct), acct, nil
}

// connectHeader is the part of connect.Request the helpers need.
type connectHeader interface {
	Header() http.Header
}

// Stat describes one entry.
func (s *filesystemService) Stat(ctx context.Context, req *connect.Request[fspb.StatRequest]) (*connect.Response[fspb.StatResponse], error) {
	p, acct, err := s.pathFor(req, req.Msg.GetPath())
	if err != nil {
		return nil, err
	}
	var e *fspb.EntryInfo
	if err := asAccount(acct, func() (err error) { e, err = entryInfo(p); return err }); err != nil {
		return nil, fsError(err)
	}
	return connect.NewResponse(&fspb.StatResponse{Entry: e}), nil
}

// MakeDir creates a directory and its parents, owned by the acting user.
func (s *filesystemService) MakeDir(ctx context.Context, req *connect.Request[fspb.MakeDirRequest]) (*connect.Response[fspb.MakeDirResponse], error) {
	p, acct, err := s.pathFor(req, req.Msg.GetPath())
	if err != nil {
		return nil, err
	}
	var e *fspb.EntryInfo
	err = asAccount(acct, func() error {
		if fi, err := os.Stat(p); err == nil {
			if fi.IsDir() {
				return connect.NewError(connect.CodeAlreadyExists, fmt.Errorf("directory %s already exists", p))
			}
			return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("%s exists and is not a directory", p))
		}
		if err := os.MkdirAll(p, 0o755); err != nil {
			return err
		}
		e, err = entryInfo(p)
		return err
	})
	if err != nil {
		return nil, fsError(err)
	}
	return connect.NewResponse(&fspb.MakeDirResponse{Entry: e}), nil
}

// Move renames source to destination, creating the destination's parents.
// The entry keeps its metadata: xattrs belong to the inode.
func (s *filesystemService) Move(ctx context.Context, req *connect.Request[fspb.MoveRequest]) (*connect.Response[fspb.MoveResponse], error) {
	src, acct, err := s.pathFor(req, req.Msg.GetSource())
	if err != nil {
		return nil, err
	}
	dst := s.a.resolvePath(req.Msg.GetDestination(), acct)
	var e *fspb.EntryInfo
	err = asAccount(acct, func() error {
		if _, err := os.Lstat(src); err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		if err := os.Rename(src, dst); err != nil {
			return err
		}
		e, err = entryInfo(dst)
		return err
	})
	if err != nil {
		return nil, fsError(err)
	}
	return connect.NewResponse(&fspb.MoveResponse{Entry: e}), nil
}

// Remove deletes a file or a whole directory tree. Like envd's, it is
// idempotent: a path that does not exist is already removed.
func (s *filesystemService) Remove(ctx context.Context, req *connect.Request[fspb.RemoveRequest]) (*connect.Response[fspb.RemoveResponse], error) {
	p, acct, err := s.pathFor(req, req.Msg.GetPath())
	if err != nil {
		return nil, err
	}
	if err := asAccount(acct, func() error { return os.RemoveAll(p) }); err != nil {
		return nil, fsError(err)
	}
	return connect.NewResponse(&fspb.RemoveResponse{}), nil
}

// ListDir lists a directory down to the requested depth (0 and 1 mean
// direct children). Symlinks are listed but not descended into, so a link
// cycle cannot make the walk endless.
func (s *filesystemService) ListDir(ctx context.Context, req *connect.Request[fspb.ListDirRequest]) (*connect.Response[fspb.ListDirResponse], error) {
	p, acct, err := s.pathFor(req, req.Msg.GetPath())
	if err != nil {
		return nil, err
	}
	depth := max(int(req.Msg.GetDepth()), 1)
	var entries []*fspb.EntryInfo
	err = asAccount(acct, func() error {
		root, err := filepath.EvalSymlinks(p)
		if err != nil {
			return err
		}
		if fi, err := os.Stat(root); err != nil {
			return err
		} else if !fi.IsDir() {
			return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("%s is not a directory", p))
		}
		entries, err = walkDir(ctx, p, root, depth)
		return err
	})
	if err != nil {
		return nil, fsError(err)
	}
	return connect.NewResponse(&fspb.ListDirResponse{Entries: entries}), nil
}

// walkDir collects entries below root up to depth levels, reporting paths
// under the requested (possibly symlinked) path shown.
func walkDir(ctx context.Context, shown, root string, depth int) ([]*fspb.EntryInfo, error) {
	var out []*fspb.EntryInfo
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return ctxErr
		}
		if path == root {
			return err
		}
		if err != nil {
			return nil // an unreadable subdirectory should not fail the listing
		}
		rel, _ := filepath.Rel(root, path)
		level := strings.Count(rel, string(filepath.Separator)) + 1
		fi, infoErr := d.Info()
		if infoErr == nil {
			out = append(out, entryFromInfo(filepath.Join(shown, rel), fi))
		}
		if d.IsDir() && level >= depth {
			return filepath.SkipDir
		}
		return nil
	})
	if errors.Is(err, context.Canceled) {
		return nil, connect.NewError(connect.CodeCanceled, err)
	}
	return out, err
}
