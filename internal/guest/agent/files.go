package agent

import (
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"strings"
)

// errBadRequest marks client mistakes in /files requests.
var errBadRequest = errors.New("bad request")

// uploadedEntry is one element of the POST /files response (envd's
// EntryInfo schema: path, name, type).
type uploadedEntry struct {
	Path string `json:"path"`
	Name string `json:"name"`
	Type string `json:"type"`
	// Metadata is what the file holds after the upload (user.e2b.*).
	Metadata map[string]string `json:"metadata,omitempty"`
}

// handleDownload serves GET /files?path=&username=. It supports ranges and,
// when the client accepts it, gzip.
func (a *Agent) handleDownload(w http.ResponseWriter, r *http.Request) {
	acct, err := a.namedAccount(r.URL.Query().Get("username"))
	if err != nil {
		writeJSONError(w, http.StatusUnauthorized, err)
		return
	}
	p := a.resolvePath(r.URL.Query().Get("path"), acct)
	var f *os.File
	err = asAccount(acct, func() (err error) { f, err = os.Open(p); return err })
	if err != nil {
		writeJSONError(w, httpStatus(err), err)
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		writeJSONError(w, httpStatus(err), err)
		return
	}
	if fi.IsDir() {
		writeJSONError(w, http.StatusBadRequest, fmt.Errorf("%s is a directory", p))
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", mime.FormatMediaType("inline", map[string]string{"filename": fi.Name()}))
	w.Header().Set("Cache-Control", "no-store")
	if acceptsGzip(r) && r.Header.Get("Range") == "" {
		w.Header().Set("Content-Encoding", "gzip")
		w.Header().Add("Vary", "Accept-Encoding")
		gz := gzip.NewWriter(w)
		if _, err := io.Copy(gz, f); err != nil {
			a.log.Warn("download aborted", "path", p, "err", err)
		}
		_ = gz.Close()
		return
	}
	http.ServeContent(w, r, fi.Name(), fi.ModTime(), f)
}

// acceptsGzip reports whether the client listed gzip in Accept-Encoding.
func acceptsGzip(r *http.Request) bool {
	for part := range strings.SplitSeq(r.Header.Get("Accept-Encoding"), ",") {
		enc, _, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(enc, "gzip") {
			return true
		}
	}
	return false
}

// handleUpload serves POST /files: a multipart form with one or more "file"
// parts, or a raw application/octet-stream body (path required). The files
// are written as the named user (see asAccount), parent directories are
// created, and the request's X-Metadata-* headers become every written
// file's metadata.
func (a *Agent) handleUpload(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	acct, err := a.namedAccount(q.Get("username"))
	if err != nil {
		writeJSONError(w, http.StatusUnauthorized, err)
		return
	}
	md := metadataFromHeaders(r.Header)
	if err := validateMetadata(md); err != nil {
		writeJSONError(w, http.StatusBadRequest, err)
		return
	}
	body := io.Reader(r.Body)
	if strings.EqualFold(r.Header.Get("Content-Encoding"), "gzip") {
		gz, err := gzip.NewReader(r.Body)
		if err != nil {
			writeJSONError(w, http.StatusBadRequest, fmt.Errorf("gzip body: %w", err))
			return
		}
		defer gz.Close()
		body = gz
	}
	mediaType, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	var entries []uploadedEntry
	switch {
	case mediaType == "application/octet-stream":
		entries, err = a.uploadRaw(q.Get("path"), body, md, acct)
	case strings.HasPrefix(mediaType, "multipart/"):
		entries, err = a.uploadMultipart(q.Get("path"), body, params["boundary"], md, acct)
	default:
		err = fmt.Errorf("%w: content type %q, want multipart/form-data or application/octet-stream", errBadRequest, mediaType)
	}
	if err != nil {
		writeJSONError(w, uploadStatus(err), err)
		return
	}
	writeJSON(w, http.StatusOK, entries)
}

// uploadStatus maps an upload failure onto an HTTP status.
func uploadStatus(err error) int {
	if errors.Is(err, errBadRequest) {
		return http.StatusBadRequest
	}
	return httpStatus(err)
}

// uploadRaw writes the whole body to path.
func (a *Agent) uploadRaw(path string, body io.Reader, md map[string]string, acct *account) ([]uploadedEntry, error) {
	if path == "" {
		return nil, fmt.Errorf("%w: the path query parameter is required for raw uploads", errBadRequest)
	}
	e, err := a.writeUserFile(a.resolvePath(path, acct), body, md, acct)
	if err != nil {
		return nil, err
	}
	return []uploadedEntry{e}, nil
}
