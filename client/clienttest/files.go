package clienttest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"mime"
	"net/http"
	"path"
	"sort"
	"strings"

	"connectrpc.com/connect"

	"github.com/forkbox/forkbox/api/gen/filesystem"
	"github.com/forkbox/forkbox/api/gen/filesystem/filesystemconnect"
)

// resolve makes a sandbox path absolute; relative paths start at the home
// of the default user, as in E2B's base template.
func resolve(p string) string {
	if !strings.HasPrefix(p, "/") {
		p = "/home/user/" + p
	}
	return path.Clean(p)
}

// fsService is the fake envd filesystem service over the agent's files.
type fsService struct {
	filesystemconnect.UnimplementedFilesystemHandler
	a *agent
}

// files runs fn on the agent's files under its lock.
func (f *fsService) files(ctx context.Context, fn func(files map[string][]byte) error) error {
	f.a.mu.Lock()
	defer f.a.mu.Unlock()
	return fn(f.a.files)
}

// kind reports whether p is a file, a directory, or missing.
func kind(files map[string][]byte, p string) filesystem.FileType {
	if _, ok := files[p]; ok {
		return filesystem.FileType_FILE_TYPE_FILE
	}
	if p == "/" {
		return filesystem.FileType_FILE_TYPE_DIRECTORY
	}
	for k := range files {
		if strings.HasPrefix(k, p+"/") {
			return filesystem.FileType_FILE_TYPE_DIRECTORY
		}
	}
	return filesystem.FileType_FILE_TYPE_UNSPECIFIED
}

func entry(files map[string][]byte, p string, t filesystem.FileType) *filesystem.EntryInfo {
	e := &filesystem.EntryInfo{Name: path.Base(p), Path: p, Type: t, Owner: "user", Group: "user", Mode: 0o644, Permissions: "-rw-r--r--"}
	if t == filesystem.FileType_FILE_TYPE_DIRECTORY {
		e.Mode, e.Permissions = 0o755|1<<31, "drwxr-xr-x"
	} else {
		e.Size = int64(len(files[p]))
	}
	return e
}

func notFound(p string) error {
	return connect.NewError(connect.CodeNotFound, fmt.Errorf("%s: no such file or directory", p))
}

// ListDir implements filesystemconnect.FilesystemHandler.
func (f *fsService) ListDir(ctx context.Context, req *connect.Request[filesystem.ListDirRequest]) (*connect.Response[filesystem.ListDirResponse], error) {
	dir, depth := resolve(req.Msg.GetPath()), int(max(req.Msg.GetDepth(), 1))
	resp := &filesystem.ListDirResponse{}
	err := f.files(ctx, func(files map[string][]byte) error {
		if kind(files, dir) != filesystem.FileType_FILE_TYPE_DIRECTORY {
			return notFound(dir)
		}
		seen := map[string]bool{}
		prefix := strings.TrimSuffix(dir, "/") + "/"
		for k := range files {
			rel, ok := strings.CutPrefix(k, prefix)
			if !ok {
				continue
			}
			parts := strings.Split(strings.TrimSuffix(rel, "/"), "/")
			for i := 1; i <= len(parts) && i <= depth; i++ {
				seen[prefix+strings.Join(parts[:i], "/")] = true
			}
		}
		names := make([]string, 0, len(seen))
		for p := range seen {
			names = append(names, p)
		}
		sort.Strings(names)
		for _, p := range names {
			resp.Entries = append(resp.Entries, entry(files, p, kind(files, p)))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(resp), nil
}

// Stat implements filesystemconnect.FilesystemHandler.
func (f *fsService) Stat(ctx context.Context, req *connect.Request[filesystem.StatRequest]) (*connect.Response[filesystem.StatResponse], error) {
	p := resolve(req.Msg.GetPath())
	resp := &filesystem.StatResponse{}
	err := f.files(ctx, func(files map[string][]byte) error {
		t := kind(files, p)
		if t == filesystem.FileType_FILE_TYPE_UNSPECIFIED {
			return notFound(p)
		}
		resp.Entry = entry(files, p, t)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(resp), nil
}

// MakeDir implements filesystemconnect.FilesystemHandler. Directories are
// remembered as a key ending in "/".
func (f *fsService) MakeDir(ctx context.Context, req *connect.Request[filesystem.MakeDirRequest]) (*connect.Response[filesystem.MakeDirResponse], error) {
	p := resolve(req.Msg.GetPath())
	resp := &filesystem.MakeDirResponse{}
	err := f.files(ctx, func(files map[string][]byte) error {
		files[p+"/"] = nil
		resp.Entry = entry(files, p, filesystem.FileType_FILE_TYPE_DIRECTORY)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(resp), nil
}

// Remove implements filesystemconnect.FilesystemHandler.
func (f *fsService) Remove(ctx context.Context, req *connect.Request[filesystem.RemoveRequest]) (*connect.Response[filesystem.RemoveResponse], error) {
	p := resolve(req.Msg.GetPath())
	err := f.files(ctx, func(files map[string][]byte) error {
		if kind(files, p) == filesystem.FileType_FILE_TYPE_UNSPECIFIED {
			return notFound(p)
		}
		for k := range files {
			if k == p || strings.HasPrefix(k, p+"/") {
				delete(files, k)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&filesystem.RemoveResponse{}), nil
}

// Move implements filesystemconnect.FilesystemHandler.
func (f *fsService) Move(ctx context.Context, req *connect.Request[filesystem.MoveRequest]) (*connect.Response[filesystem.MoveResponse], error) {
	src, dst := resolve(req.Msg.GetSource()), resolve(req.Msg.GetDestination())
	resp := &filesystem.MoveResponse{}
	err := f.files(ctx, func(files map[string][]byte) error {
		t := kind(files, src)
		if t == filesystem.FileType_FILE_TYPE_UNSPECIFIED {
			return notFound(src)
		}
		for k, v := range files {
			if k == src || strings.HasPrefix(k, src+"/") {
				delete(files, k)
				files[dst+strings.TrimPrefix(k, src)] = v
			}
		}
		resp.Entry = entry(files, dst, t)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(resp), nil
}

func (a *agent) download(w http.ResponseWriter, r *http.Request) {
	p := resolve(r.URL.Query().Get("path"))
	var data []byte
	ok := false
	a.mu.Lock()
	data, ok = a.files[p]
	a.mu.Unlock()
	if !ok {
		writeError(w, http.StatusNotFound, p+": no such file")
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	_, _ = w.Write(data)
}

// upload accepts a raw octet-stream body or a multipart "file" part, as envd
// does.
func (a *agent) upload(w http.ResponseWriter, r *http.Request) {
	p := resolve(r.URL.Query().Get("path"))
	body := io.Reader(r.Body)
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt == "multipart/form-data" {
		file, _, err := r.FormFile("file")
		if err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		defer file.Close()
		body = file
	}
	data, err := io.ReadAll(body)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	a.mu.Lock()
	a.files[p] = data
	a.mu.Unlock()
	entry := map[string]any{"path": p, "name": path.Base(p), "type": "file"}
	md := map[string]string{}
	for name, v := range r.Header {
		if key, ok := strings.CutPrefix(name, "X-Metadata-"); ok && key != "" {
			md[strings.ToLower(key)] = v[0] // envd: lowercased keys, first value wins
		}
	}
	if len(md) > 0 {
		entry["metadata"] = md
	}
	writeJSON(w, http.StatusOK, []map[string]any{entry})
}

func copyFiles(m map[string][]byte) map[string][]byte {
	out := make(map[string][]byte, len(m))
	for k, v := range m {
		out[k] = bytes.Clone(v)
	}
	return out
}
