package server

import (
	"fmt"
	"net/http"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/sandbox"
)

// pause is POST /sandboxes/{id}/pause {memory?}: 204 once the pause is
// under way (the sandbox reports paused at once; connect waits for the
// pause to complete). 409 when the sandbox is not running (already paused
// or being paused, still being created, busy), 404 when unknown.
func (s *Server) pause(w http.ResponseWriter, r *http.Request) {
	var body pauseBody
	if err := decodeBody(w, r, &body, true); err != nil {
		writeError(w, err)
		return
	}
	id := r.PathValue("id")
	if err := s.mgr.Pause(r.Context(), id); err != nil {
		if errdefs.IsConflict(err) {
			err = s.pauseConflict(r, id, err)
		}
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// pauseConflict words a refused pause for the client.
func (s *Server) pauseConflict(r *http.Request, id string, err error) error {
	sb, gerr := s.mgr.Get(r.Context(), id)
	if gerr != nil {
		return err
	}
	switch sb.State {
	case sandbox.StatePaused, sandbox.StatePausing:
		return fmt.Errorf("sandbox %s is already paused: %w", id, errdefs.ErrConflict)
	default:
		return fmt.Errorf("sandbox %s is %s and cannot be paused now: %w", id, sb.State, errdefs.ErrConflict)
	}
}

// resume is the deprecated POST /sandboxes/{id}/resume {timeout,
// autoPause}: a paused sandbox (or one being paused) is resumed with the
// deadline now + timeout (default 300 s) and answers 201 with the Sandbox
// shape. A running sandbox is a 409, as E2B answers it; connect is the call
// that accepts both.
func (s *Server) resume(w http.ResponseWriter, r *http.Request) {
	var body resumeBody
	if err := decodeBody(w, r, &body, true); err != nil {
		writeError(w, err)
		return
	}
	d, err := optionalSeconds("timeout", body.Timeout)
	if err != nil {
		writeError(w, err)
		return
	}
	id := r.PathValue("id")
	sb, err := s.mgr.Get(r.Context(), id)
	if err != nil {
		writeError(w, err)
		return
	}
	if sb.State.Public() == sandbox.PublicRunning {
		writeError(w, fmt.Errorf("sandbox %s is already running: %w", id, errdefs.ErrConflict))
		return
	}
	sb, _, err = s.mgr.Connect(r.Context(), id, d)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, s.toSandboxJSON(sb))
}
