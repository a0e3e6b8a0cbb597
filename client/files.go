package client

import (
	"bytes"
	"context"
	"encoding/json"
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
	// Metadata is the file's user metadata (envd ≥ 0.6.2; kept in the
	// sandbox as user.e2b.* extended attributes).
	Metadata map[string]string `json:"metadata,omitempty"`
}

func entryFromProto(e *filesystem.EntryInfo) EntryInfo {
	out := EntryInfo{
		Name: e.GetName(), Path: e.GetPath(), Size: e.GetSize(), Mode: e.GetMode(),
		Permissions: e.GetPermissions(), Owner: e.GetOwner(), Group: e.GetGroup(),
		SymlinkTarget: e.GetSymlinkTarget(), Metadata: e.GetMetadata(),
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
	resp, err := s.filesRequest(ctx, http.MethodGet, path, nil, nil)
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
	_, err := s.WriteFileWithMetadata(ctx, path, r, nil)
	return err
}

// WriteFileWithMetadata uploads the content of r to path and makes md the
// file's whole metadata (each key lowercased; printable ASCII, as envd
// 0.6.2 requires): a nil md clears what an earlier upload set. It returns
// the written entry as the agent reports it (path, name, type, metadata).
func (s *SandboxConn) WriteFileWithMetadata(ctx context.Context, path string, r io.Reader, md map[string]string) (*EntryInfo, error) {
	// A raw octet-stream body (envd ≥ 0.2 accepts it) streams without the
	// multipart framing and buffering.
	hdr := http.Header{"Content-Type": {"application/octet-stream"}}
	for k, v := range md {
		hdr.Set("X-Metadata-"+k, v)
	}
	resp, err := s.filesRequest(ctx, http.MethodPost, path, r, hdr)
	if err != nil {
		return nil, fmt.Errorf("write %s in %s: %w", path, s.id, err)
	}
	defer resp.Body.Close()
	var written []EntryInfo
	if err := json.NewDecoder(resp.Body).Decode(&written); err != nil || len(written) != 1 {
		return nil, fmt.Errorf("write %s in %s: unexpected answer (%v)", path, s.id, err)
	}
	return &written[0], nil
}

// filesRequest calls the agent's /files endpoint and turns non-2xx answers
// into *Error.
func (s *SandboxConn) filesRequest(ctx context.Context, method, path string, body io.Reader, hdr http.Header) (*http.Response, error) {
	q := url.Values{"path": {path}}
	if s.user != "" {
		q.Set("username", s.user)
	}
	req, err := http.NewRequestWithContext(ctx, method, s.base+"/files?"+q.Encode(), body)
	if err != nil {
		return nil, err
	}
	for k, v := range hdr {
		req.Header[k] = v
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
