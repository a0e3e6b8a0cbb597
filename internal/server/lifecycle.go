package server

import (
	"fmt"
	"net/http"

	"github.com/forkbox/forkbox/internal/errdefs"
)

// killSandbox is DELETE /sandboxes/{id}: 204, or 404 when unknown or gone.
func (s *Server) killSandbox(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := s.mgr.Kill(r.Context(), id); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// setTimeout is POST /sandboxes/{id}/timeout {timeout}: the deadline
// becomes now + timeout, which may shorten it. 204 on success.
func (s *Server) setTimeout(w http.ResponseWriter, r *http.Request) {
	var body timeoutBody
	if err := decodeBody(w, r, &body, false); err != nil {
		writeError(w, err)
		return
	}
	if body.Timeout == nil {
		writeError(w, fmt.Errorf("timeout is required: %w", errdefs.ErrInvalidArgument))
		return
	}
	d, err := seconds("timeout", *body.Timeout)
	if err != nil {
		writeError(w, err)
		return
	}
	if _, err := s.mgr.SetTimeout(r.Context(), r.PathValue("id"), d); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// refresh is POST /sandboxes/{id}/refreshes {duration ≤ 3600}: the
// deadline moves to now + duration unless it is already later. 204.
func (s *Server) refresh(w http.ResponseWriter, r *http.Request) {
	var body refreshBody
	if err := decodeBody(w, r, &body, true); err != nil {
		writeError(w, err)
		return
	}
	var dur int64
	if body.Duration != nil {
		dur = *body.Duration
	}
	d, err := seconds("duration", dur)
	if err != nil {
		writeError(w, err)
		return
	}
	if _, err := s.mgr.Refresh(r.Context(), r.PathValue("id"), d); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
