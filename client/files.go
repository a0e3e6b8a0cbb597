package client

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"connectrpc.com/connect"

	"github.com/forkbox/forkbox/api/gen/filesystem"
)

// Entry types of EntryInfo.Type.
const (
	TypeFile      = "file"
	TypeDirectory = "dir"
	TypeSymlink   = "symlink"
)

// EntryInfo describes a file system entry in a sandbox.
type EntryInfo struct {
	Name string `json:"name"`
	// Type is TypeFile, TypeDirectory, TypeSymlink or empty when unknown.
	Type          string    `json:"type"`
	Path          string    `json:"path"`
	Size          int64     `json:"size"`
	Mode          uint32    `json:"mode"`
	Permissions   string    `json:"permissions,omitempty"`
	Owner         string    `json:"owner,omitempty"`
	Group         string    `json:"group,omitempty"`
	ModifiedTime  time.Time `json:"modifiedTime,omitzero"`
	SymlinkTarget string    `json:"symlinkTarget,omitempty"`
}

func entryFromProto(e *filesystem.EntryInfo) EntryInfo {
	out := EntryInfo{
		Name: e.GetName(), Path: e.GetPath(), Size: e.GetSize(), Mode: e.GetMode(),
		Permissions: e.GetPermissions(), Owner: e.GetOwner(), Group: e.GetGroup(),
		SymlinkTarget: e.GetSymlinkTarget(),
	}
	switch e.GetType() {
	case filesystem.FileType_FILE_TYPE_FILE:
		out.Type = TypeFile
	case filesystem.FileType_FILE_TYPE_DIRECTORY:
		out.Type = TypeDirectory
	case filesystem.FileType_FILE_TYPE_SYMLINK:
		out.Type = TypeSymlink
	}
	if e.GetModifiedTime() != nil {
		out.ModifiedTime = e.GetModifiedTime().AsTime()
	}
	return out
}

// userRequest wraps a message in a Connect request carrying the user header.
func userRequest[T any](s *SandboxConn, msg *T) *connect.Request[T] {
	req := connect.NewRequest(msg)
	setUser(req.Header(), s.user)
	return req
}

// ListDir lists a directory. depth 0 or 1 lists direct children; larger
// values descend that many levels. Relative paths resolve against the user's
// home.
func (s *SandboxConn) ListDir(ctx context.Context, path string, depth int) ([]EntryInfo, error) {
	if depth < 0 {
		depth = 0
	}
	resp, err := s.files.ListDir(ctx, userRequest(s, &filesystem.ListDirRequest{Path: path, Depth: uint32(depth)}))
	if err != nil {
		return nil, fmt.Errorf("list %s in %s: %w", path, s.id, err)
	}
	out := make([]EntryInfo, 0, len(resp.Msg.GetEntries()))
	for _, e := range resp.Msg.GetEntries() {
		out = append(out, entryFromProto(e))
	}
	return out, nil
}

// Stat describes one entry.
func (s *SandboxConn) Stat(ctx context.Context, path string) (*EntryInfo, error) {
	resp, err := s.files.Stat(ctx, userRequest(s, &filesystem.StatRequest{Path: path}))
	if err != nil {
		return nil, fmt.Errorf("stat %s in %s: %w", path, s.id, err)
	}
	e := entryFromProto(resp.Msg.GetEntry())
	return &e, nil
}

// MakeDir creates a directory and its missing parents.
func (s *SandboxConn) MakeDir(ctx context.Context, path string) (*EntryInfo, error) {
	resp, err := s.files.MakeDir(ctx, userRequest(s, &filesystem.MakeDirRequest{Path: path}))
	if err != nil {
		return nil, fmt.Errorf("mkdir %s in %s: %w", path, s.id, err)
	}
	e := entryFromProto(resp.Msg.GetEntry())
	return &e, nil
}

// Remove deletes a file or a directory tree.
func (s *SandboxConn) Remove(ctx context.Context, path string) error {
	if _, err := s.files.Remove(ctx, userRequest(s, &filesystem.RemoveRequest{Path: path})); err != nil {
		return fmt.Errorf("remove %s in %s: %w", path, s.id, err)
	}
	return nil
}

// Move renames src to dst.
func (s *SandboxConn) Move(ctx context.Context, src, dst string) (*EntryInfo, error) {
	resp, err := s.files.Move(ctx, userRequest(s, &filesystem.MoveRequest{Source: src, Destination: dst}))
	if err != nil {
		return nil, fmt.Errorf("move %s to %s in %s: %w", src, dst, s.id, err)
	}
	e := entryFromProto(resp.Msg.GetEntry())
	return &e, nil
}

// ReadFile downloads a file (GET /files on the agent).
func (s *SandboxConn) ReadFile(ctx context.Context, path string) ([]byte, error) {
	rc, err := s.OpenFile(ctx, path)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		return nil, fmt.Errorf("read %s in %s: %w", path, s.id, err)
	}
	return data, nil
}

// OpenFile starts a download and returns the file's content as a stream; the
// caller must close it.
func (s *SandboxConn) OpenFile(ctx context.Context, path string) (io.ReadCloser, error) {
	resp, err := s.filesRequest(ctx, http.MethodGet, path, nil, "")
	if err != nil {
		return nil, fmt.Errorf("read %s in %s: %w", path, s.id, err)
	}
	return resp.Body, nil
}

// WriteFile uploads data to path, creating parent directories and replacing
// an existing file (POST /files on the agent).
func (s *SandboxConn) WriteFile(ctx context.Context, path string, data []byte) error {
	return s.WriteFileFrom(ctx, path, bytes.NewReader(data))
}

// WriteFileFrom uploads the content of r to path, streaming it.
func (s *SandboxConn) WriteFileFrom(ctx context.Context, path string, r io.Reader) error {
	// A raw octet-stream body (envd ≥ 0.2 accepts it) streams without the
	// multipart framing and buffering.
	resp, err := s.filesRequest(ctx, http.MethodPost, path, r, "application/octet-stream")
	if err != nil {
		return fmt.Errorf("write %s in %s: %w", path, s.id, err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return nil
}

// filesRequest calls the agent's /files endpoint and turns non-2xx answers
// into *Error.
func (s *SandboxConn) filesRequest(ctx context.Context, method, path string, body io.Reader, contentType string) (*http.Response, error) {
	q := url.Values{"path": {path}}
	if s.user != "" {
		q.Set("username", s.user)
	}
	req, err := http.NewRequestWithContext(ctx, method, s.base+"/files?"+q.Encode(), body)
	if err != nil {
		return nil, err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	setUser(req.Header, s.user)
	resp, err := s.hc.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		defer resp.Body.Close()
		return nil, decodeError(resp)
	}
	return resp, nil
}
