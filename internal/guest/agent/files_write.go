package agent

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"os"
	"path/filepath"
)

// uploadMultipart writes every "file" part. Without a path query parameter
// each part's filename names its destination; the SDK sends full paths
// there, so the raw header value is used rather than multipart's
// base-name-only FileName.
func (a *Agent) uploadMultipart(path string, body io.Reader, boundary string, md map[string]string, acct *account) ([]uploadedEntry, error) {
	if boundary == "" {
		return nil, fmt.Errorf("%w: multipart body without boundary", errBadRequest)
	}
	mr := multipart.NewReader(body, boundary)
	entries := []uploadedEntry{}
	seen := map[string]bool{}
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%w: reading multipart body: %v", errBadRequest, err)
		}
		if part.FormName() != "file" {
			part.Close()
			continue
		}
		dest, err := a.partPath(path, part, acct)
		if err == nil && seen[dest] {
			err = fmt.Errorf("%w: %s appears twice in one upload", errBadRequest, dest)
		}
		if err != nil {
			part.Close()
			return nil, err
		}
		seen[dest] = true
		e, err := a.writeUserFile(dest, part, md, acct)
		part.Close()
		if err != nil {
			return nil, err
		}
		entries = append(entries, e)
	}
	if len(entries) == 0 {
		return nil, fmt.Errorf("%w: no \"file\" part in the form", errBadRequest)
	}
	return entries, nil
}

// partPath picks a part's destination: the path query parameter if given,
// else the part's filename.
func (a *Agent) partPath(path string, part *multipart.Part, acct *account) (string, error) {
	if path == "" {
		_, params, err := mime.ParseMediaType(part.Header.Get("Content-Disposition"))
		if err != nil || params["filename"] == "" {
			return "", fmt.Errorf("%w: no path parameter and no filename in the part", errBadRequest)
		}
		path = params["filename"]
	}
	return a.resolvePath(path, acct), nil
}

// writeUserFile creates or truncates dest with the content of r, creating
// parent directories, and makes md its metadata — all as acct, so the user
// can only write where its rights allow and owns what it creates.
func (a *Agent) writeUserFile(dest string, r io.Reader, md map[string]string, acct *account) (uploadedEntry, error) {
	err := asAccount(acct, func() error {
		if err := os.MkdirAll(filepath.Dir(dest), 0o755); err != nil {
			return err
		}
		if fi, err := os.Stat(dest); err == nil && fi.IsDir() {
			return fmt.Errorf("%w: path is a directory: %s", errBadRequest, dest)
		}
		f, err := os.OpenFile(dest, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			return err
		}
		_, err = io.Copy(f, r)
		if err == nil {
			err = writeMetadata(f, md)
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return err
	})
	if err != nil {
		return uploadedEntry{}, fmt.Errorf("writing %s: %w", dest, err)
	}
	e := uploadedEntry{Path: dest, Name: filepath.Base(dest), Type: "file"}
	_ = asAccount(acct, func() error { e.Metadata = readMetadata(dest); return nil })
	return e, nil
}
