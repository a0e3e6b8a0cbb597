package server

import (
	"fmt"
	"net/http"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/sandbox"
)

// forkResultJSON is SandboxForkResult: exactly one of sandbox and error.
type forkResultJSON struct {
	Sandbox *sandboxJSON `json:"sandbox,omitempty"`
	Error   *apiError    `json:"error,omitempty"`
}

// fork is E2B's POST /sandboxes/{id}/fork {count 1..100, timeout}: one
// snapshot, then count sandboxes started from it, each succeeding or
// failing on its own. 201 with one SandboxForkResult per requested fork;
// a non-201 (400 bad count, 404 unknown, 409 busy) means no fork was
// attempted.
func (s *Server) fork(w http.ResponseWriter, r *http.Request) {
	if !s.mgr.SpreadsCopies(r.Context(), r.PathValue("id")) && !s.acceptsNew(w, r) {
		return // copies that start elsewhere may be made on a drained node
	}
	var body forkBody
	if err := decodeBody(w, r, &body, true); err != nil {
		writeError(w, err)
		return
	}
	opts, err := cloneOptions(body.Count, body.Timeout, false)
	if err != nil {
		writeError(w, err)
		return
	}
	id := r.PathValue("id")
	var res *sandbox.CloneResult
	res, err = s.mgr.Clone(r.Context(), id, opts)
	if err != nil {
		writeError(w, err)
		return
	}
	out := make([]forkResultJSON, len(res.Sandboxes))
	for i, sb := range res.Sandboxes {
		if sb != nil && res.Errors[i] == nil {
			j := s.toSandboxJSON(sb)
			out[i].Sandbox = &j
			continue
		}
		err := res.Errors[i]
		if err == nil {
			err = fmt.Errorf("fork %d did not start", i)
		}
		e := toAPIError(err, "the fork could not be started")
		out[i].Error = &e
	}
	writeJSON(w, http.StatusCreated, out)
}

// cloneJSON is the answer of Novita's clone.
type cloneJSON struct {
	Sandboxes          []sandboxJSON `json:"sandboxes"`
	Count              int           `json:"count"`
	SnapshotTemplateID string        `json:"snapshotTemplateId"`
}

// clone is Novita's POST /sandboxes/{id}/clone {count, strict, timeout}:
// 201 {sandboxes, count, snapshotTemplateId} with the clones that started.
// strict: unless all count start, none is kept and the call fails with the
// first failure's status. Not strict: the clones that started are returned;
// if none did, the call fails likewise.
func (s *Server) clone(w http.ResponseWriter, r *http.Request) {
	if !s.mgr.SpreadsCopies(r.Context(), r.PathValue("id")) && !s.acceptsNew(w, r) {
		return // copies that start elsewhere may be made on a drained node
	}
	var body cloneBody
	if err := decodeBody(w, r, &body, true); err != nil {
		writeError(w, err)
		return
	}
	opts, err := cloneOptions(body.Count, body.Timeout, body.Strict)
	if err != nil {
		writeError(w, err)
		return
	}
	if body.Concurrency < 0 {
		writeError(w, fmt.Errorf("concurrency must not be negative: %w", errdefs.ErrInvalidArgument))
		return
	}
	opts.Concurrency = body.Concurrency
	id := r.PathValue("id")
	var res *sandbox.CloneResult
	res, err = s.mgr.Clone(r.Context(), id, opts)
	if err != nil {
		e := toAPIError(err, "clone failed; no copy was kept")
		writeStatus(w, e.Code, e.Message)
		return
	}
	out := cloneJSON{Sandboxes: []sandboxJSON{}, SnapshotTemplateID: res.SnapshotID}
	var firstErr error
	for i, sb := range res.Sandboxes {
		if sb == nil || res.Errors[i] != nil {
			if firstErr == nil {
				firstErr = res.Errors[i]
			}
			continue
		}
		j := s.toSandboxJSON(sb)
		// Novita's SDK names a sandbox "<sandboxID>-<clientID>" when clientID
		// is set, which is no id forkbox routes: send it empty.
		j.ClientID = ""
		out.Sandboxes = append(out.Sandboxes, j)
	}
	if len(out.Sandboxes) == 0 {
		if firstErr == nil {
			firstErr = fmt.Errorf("no clone started")
		}
		e := toAPIError(firstErr, "clone failed: no copy could be started")
		writeStatus(w, e.Code, e.Message)
		return
	}
	out.Count = len(out.Sandboxes)
	writeJSON(w, http.StatusCreated, out)
}

// cloneOptions validates the count and timeout of fork and clone.
func cloneOptions(count *int, timeout *int64, strict bool) (sandbox.CloneOptions, error) {
	n, err := forkCount(count)
	if err != nil {
		return sandbox.CloneOptions{}, err
	}
	d, err := optionalSeconds("timeout", timeout)
	if err != nil {
		return sandbox.CloneOptions{}, err
	}
	return sandbox.CloneOptions{Count: n, Strict: strict, Timeout: d}, nil
}
