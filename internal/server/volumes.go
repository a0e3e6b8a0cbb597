package server

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/sandbox"
)

// volumeJSON is E2B's Volume; volumeTokenJSON its VolumeAndToken.
type volumeJSON struct {
	VolumeID string `json:"volumeID"`
	Name     string `json:"name"`
}

type volumeTokenJSON struct {
	VolumeID string `json:"volumeID"`
	Name     string `json:"name"`
	Token    string `json:"token"`
}

func volumeToken(v *sandbox.Volume) volumeTokenJSON {
	return volumeTokenJSON{VolumeID: v.ID, Name: v.Name, Token: v.Token}
}

// volumeRoutes registers the volume control API (E2B's /volumes) and
// the content API.
func (s *Server) volumeRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /volumes", s.createVolume)
	mux.HandleFunc("GET /volumes", s.listVolumes)
	mux.HandleFunc("GET /volumes/{id}", s.getVolume)
	mux.HandleFunc("DELETE /volumes/{id}", s.deleteVolume)
	s.volumeContentRoutes(mux)
}

// createVolume answers POST /volumes ({name}) with 201 and the volume's
// token.
func (s *Server) createVolume(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Name string `json:"name"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16)).Decode(&body); err != nil {
		writeError(w, fmt.Errorf("bad volume body: %v: %w", err, errdefs.ErrInvalidArgument))
		return
	}
	v, err := s.mgr.CreateVolume(r.Context(), body.Name)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, volumeToken(v))
}

// listVolumes answers GET /volumes.
func (s *Server) listVolumes(w http.ResponseWriter, r *http.Request) {
	vs, err := s.mgr.ListVolumes(r.Context())
	if err != nil {
		writeError(w, err)
		return
	}
	out := make([]volumeJSON, 0, len(vs))
	for _, v := range vs {
		out = append(out, volumeJSON{VolumeID: v.ID, Name: v.Name})
	}
	writeJSON(w, http.StatusOK, out)
}

// getVolume answers GET /volumes/{id}.
func (s *Server) getVolume(w http.ResponseWriter, r *http.Request) {
	v, err := s.mgr.GetVolume(r.Context(), r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, volumeToken(v))
}

// deleteVolume answers DELETE /volumes/{id}: 204, 404, or 409 while a
// sandbox mounts it. In a cluster the volume's node answers: it has the
// storage and the sandboxes mounting it.
func (s *Server) deleteVolume(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if s.forwardVolume(w, r, "volume "+id, func() (string, error) { return s.mgr.VolumeHome(r.Context(), id) }, writeError) {
		return
	}
	if err := s.mgr.DeleteVolume(r.Context(), id); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
