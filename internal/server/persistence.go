package server

import (
	"net/http"
)

// pause is POST /sandboxes/{id}/pause {memory?}: 204 once the pause is
// under way (memory: false keeps only the files; the resume cold-boots) (the sandbox reports paused at once; connect waits for the
// pause to complete). 409 when the sandbox is not running (already paused
// or being paused, still being created, busy), 404 when unknown.
func (s *Server) pause(w http.ResponseWriter, r *http.Request) {
	var body pauseBody
	if err := decodeBody(w, r, &body, true); err != nil {
		writeError(w, err)
		return
	}
	pause := s.mgr.Pause
	if body.Memory != nil && !*body.Memory {
		pause = s.mgr.PauseFilesystem // only the files; resume cold-boots
	}
	if err := pause(r.Context(), r.PathValue("id")); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
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
	sb, err := s.mgr.Resume(r.Context(), r.PathValue("id"), d)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, s.toSandboxJSON(sb))
}
