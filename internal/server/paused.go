package server

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/sandbox"
)

// pausedBody is E2B's data-plane answer for a paused sandbox that traffic
// does not resume. It goes out as a 502: the SDKs read only a 502 from
// envd's /health as "not running" (sandbox.isRunning() is false after
// pause()) and throw on any other error status.
type pausedBody struct {
	SandboxID     string `json:"sandboxId"`
	Message       string `json:"message"`
	Code          int    `json:"code"`
	CanAutoResume bool   `json:"canAutoResume"`
}

// errPaused marks a data-plane refusal because the sandbox is paused (or
// being paused) and was not created with auto-resume.
var errPaused = errors.New("the sandbox is paused")

// pausedError returns errPaused for sb when it is paused or being paused.
func pausedError(sb *sandbox.Sandbox) error {
	switch sb.State {
	case sandbox.StatePausing, sandbox.StatePaused:
		return fmt.Errorf("sandbox %s is paused: resume it (connect) before using it, or create it with autoResume: %w %w",
			sb.ID, errPaused, errdefs.ErrConflict)
	}
	return nil
}

// writePaused answers a request for a paused sandbox in E2B's shape.
func writePaused(w http.ResponseWriter, id string, canAutoResume bool) {
	writeJSON(w, http.StatusBadGateway, pausedBody{
		SandboxID: id, Message: "The sandbox is paused", Code: http.StatusBadGateway, CanAutoResume: canAutoResume,
	})
}
