package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/volumes"
)

// volumeContentPrefix is the content API's path prefix: it authenticates
// with the volume's own bearer token, not an API key (requireAPIKey lets
// it through).
const volumeContentPrefix = "/volumecontent/"

// volumeContentRoutes registers the content API the SDK's Volume reaches
// at E2B_VOLUME_API_URL (or https://api.<domain>).
func (s *Server) volumeContentRoutes(mux *http.ServeMux) {
	for _, rt := range []struct {
		pattern string
		h       func(http.ResponseWriter, *http.Request, *volumes.Content, string)
	}{
		{"GET /volumecontent/{id}/dir", s.volList},
		{"POST /volumecontent/{id}/dir", s.volMakeDir},
		{"GET /volumecontent/{id}/path", s.volStat},
		{"PATCH /volumecontent/{id}/path", s.volUpdate},
		{"DELETE /volumecontent/{id}/path", s.volRemove},
		{"GET /volumecontent/{id}/file", s.volRead},
		{"PUT /volumecontent/{id}/file", s.volWrite},
	} {
		mux.HandleFunc(rt.pattern, s.withVolume(rt.h))
	}
	mux.HandleFunc(volumeContentPrefix, func(w http.ResponseWriter, r *http.Request) {
		writeContentError(w, fmt.Errorf("no route for %s %s: %w", r.Method, r.URL.Path, errdefs.ErrNotFound))
	})
}

// withVolume opens the volume the request names with its bearer token
// (on the node keeping its storage: another node forwards the request).
func (s *Server) withVolume(h func(http.ResponseWriter, *http.Request, *volumes.Content, string)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		if s.forwardVolume(w, r, "volume "+id, func() (string, error) { return s.mgr.VolumeHome(r.Context(), id) }, writeContentError) {
			return
		}
		c, err := s.mgr.VolumeContent(r.Context(), id, apiKey(r))
		if err != nil {
			writeContentError(w, err)
			return
		}
		defer c.Close()
		h(w, r, c, r.URL.Query().Get("path"))
	}
}

// writeContentError answers in the content API's {code, message} shape;
// a full volume is 507 (Insufficient Storage), not the control API's 429,
// which SDKs retry.
func writeContentError(w http.ResponseWriter, err error) {
	e := toAPIError(err, "internal error")
	if errors.Is(err, errdefs.ErrResourceExhausted) {
		e.Code = http.StatusInsufficientStorage
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.Code)
	json.NewEncoder(w).Encode(map[string]string{"code": strconv.Itoa(e.Code), "message": e.Message})
}

// contentMeta reads uid, gid and mode from the query.
func contentMeta(r *http.Request) (volumes.Meta, error) {
	var m volumes.Meta
	for _, f := range []struct {
		name string
		dst  **uint32
	}{{"uid", &m.UID}, {"gid", &m.GID}, {"mode", &m.Mode}} {
		v := r.URL.Query().Get(f.name)
		if v == "" {
			continue
		}
		n, err := strconv.ParseUint(v, 10, 32)
		if err != nil {
			return m, fmt.Errorf("%s %q: %w", f.name, v, errdefs.ErrInvalidArgument)
		}
		u := uint32(n)
		*f.dst = &u
	}
	return m, nil
}

func (s *Server) volList(w http.ResponseWriter, r *http.Request, c *volumes.Content, p string) {
	depth := 1
	if d := r.URL.Query().Get("depth"); d != "" {
		n, err := strconv.Atoi(d)
		if err != nil || n < 1 {
			writeContentError(w, fmt.Errorf("depth %q: %w", d, errdefs.ErrInvalidArgument))
			return
		}
		depth = n
	}
	ents, err := c.List(p, depth)
	answerContent(w, ents, err)
}

func (s *Server) volMakeDir(w http.ResponseWriter, r *http.Request, c *volumes.Content, p string) {
	m, err := contentMeta(r)
	if err != nil {
		writeContentError(w, err)
		return
	}
	e, err := c.MakeDir(p, m, r.URL.Query().Get("force") == "true")
	answerContentStatus(w, http.StatusCreated, e, err)
}

func (s *Server) volStat(w http.ResponseWriter, r *http.Request, c *volumes.Content, p string) {
	e, err := c.Stat(p)
	answerContent(w, e, err)
}

func (s *Server) volUpdate(w http.ResponseWriter, r *http.Request, c *volumes.Content, p string) {
	var body struct {
		UID  *uint32 `json:"uid"`
		GID  *uint32 `json:"gid"`
		Mode *uint32 `json:"mode"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16)).Decode(&body); err != nil {
		writeContentError(w, fmt.Errorf("bad metadata body: %v: %w", err, errdefs.ErrInvalidArgument))
		return
	}
	e, err := c.UpdateMetadata(p, volumes.Meta{UID: body.UID, GID: body.GID, Mode: body.Mode})
	answerContent(w, e, err)
}

func (s *Server) volRemove(w http.ResponseWriter, r *http.Request, c *volumes.Content, p string) {
	if err := c.Remove(p); err != nil {
		writeContentError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// volRead streams the file: the body is copied as it is read, never held.
func (s *Server) volRead(w http.ResponseWriter, r *http.Request, c *volumes.Content, p string) {
	f, fi, err := c.ReadFile(p)
	if err != nil {
		writeContentError(w, err)
		return
	}
	defer f.Close()
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.FormatInt(fi.Size(), 10))
	w.WriteHeader(http.StatusOK)
	io.Copy(w, f)
}

// volWrite streams the request body into the file.
func (s *Server) volWrite(w http.ResponseWriter, r *http.Request, c *volumes.Content, p string) {
	m, err := contentMeta(r)
	if err != nil {
		writeContentError(w, err)
		return
	}
	e, err := c.WriteFile(p, r.Body, m)
	answerContentStatus(w, http.StatusCreated, e, err)
}

func answerContent(w http.ResponseWriter, v any, err error) {
	answerContentStatus(w, http.StatusOK, v, err)
}

func answerContentStatus(w http.ResponseWriter, status int, v any, err error) {
	if err != nil {
		writeContentError(w, err)
		return
	}
	writeJSON(w, status, v)
}

// isVolumeContent reports whether r is for the content API.
func isVolumeContent(r *http.Request) bool {
	return strings.HasPrefix(r.URL.Path, volumeContentPrefix)
}
