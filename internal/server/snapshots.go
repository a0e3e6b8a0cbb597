package server

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/sandbox"
)

// snapshotInfoJSON is the SnapshotInfo schema (snapshotID, names) plus
// forkbox's sandboxID, createdAt and expiresAt. snapshotID is usable as a
// templateID; names are the aliases it can also be created from.
type snapshotInfoJSON struct {
	SnapshotID string   `json:"snapshotID"`
	Names      []string `json:"names"`
	SandboxID  string   `json:"sandboxID,omitempty"`
	CreatedAt  string   `json:"createdAt,omitempty"`
	ExpiresAt  string   `json:"expiresAt,omitempty"`
}

func toSnapshotInfo(t *sandbox.Snapshot) snapshotInfoJSON {
	out := snapshotInfoJSON{SnapshotID: t.ID, Names: append([]string{}, t.Names...), SandboxID: t.SourceSandboxID}
	if !t.CreatedAt.IsZero() {
		out.CreatedAt = wireTime(t.CreatedAt)
	}
	if !t.ExpiresAt.IsZero() {
		out.ExpiresAt = wireTime(t.ExpiresAt)
	}
	return out
}

// maxSnapshotName bounds snapshot names.
const maxSnapshotName = 128

// checkSnapshotName refuses names that could not be used as a templateID.
func checkSnapshotName(name string) error {
	if len(name) > maxSnapshotName {
		return fmt.Errorf("name is longer than %d bytes: %w", maxSnapshotName, errdefs.ErrInvalidArgument)
	}
	if strings.IndexFunc(name, func(r rune) bool { return unicode.IsSpace(r) || !unicode.IsPrint(r) }) >= 0 {
		return fmt.Errorf("name %q must not contain spaces or control characters: %w", name, errdefs.ErrInvalidArgument)
	}
	return nil
}

// createSnapshot is POST /sandboxes/{id}/snapshots {name?, ttl?}: 201
// with SnapshotInfo. The sandbox keeps running (a paused one stays paused).
// 404 unknown sandbox, 409 a name already taken or a sandbox busy with
// another operation.
func (s *Server) createSnapshot(w http.ResponseWriter, r *http.Request) {
	var body snapshotBody
	if err := decodeBody(w, r, &body, true); err != nil {
		writeError(w, err)
		return
	}
	if err := checkSnapshotName(body.Name); err != nil {
		writeError(w, err)
		return
	}
	ttl, err := optionalSeconds("ttl", body.TTL)
	if err != nil {
		writeError(w, err)
		return
	}
	snap, err := s.mgr.Snapshot(r.Context(), r.PathValue("id"), sandbox.SnapshotOptions{Name: body.Name, TTL: ttl})
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, toSnapshotInfo(snap))
}

// listSnapshots is GET /snapshots?sandboxID&name&limit&nextToken: an
// array of SnapshotInfo, newest first; the next page's token is sent in
// X-Next-Token (absent on the last page). name matches a snapshot's name
// or its id, optionally with a :tag (sandbox.SnapshotFilter).
func (s *Server) listSnapshots(w http.ResponseWriter, r *http.Request) {
	f, err := parseSnapshotFilter(r.URL.Query())
	if err != nil {
		writeError(w, err)
		return
	}
	snaps, next, err := s.mgr.ListSnapshots(r.Context(), f)
	if err != nil {
		writeError(w, err)
		return
	}
	if next != "" {
		w.Header().Set("X-Next-Token", next)
	}
	out := make([]snapshotInfoJSON, 0, len(snaps))
	for _, t := range snaps {
		out = append(out, toSnapshotInfo(t))
	}
	writeJSON(w, http.StatusOK, out)
}

// parseSnapshotFilter reads GET /snapshots' query: limit is 1..100
// (default 100).
func parseSnapshotFilter(q url.Values) (sandbox.SnapshotFilter, error) {
	f := sandbox.SnapshotFilter{
		SandboxID: q.Get("sandboxID"), Name: q.Get("name"),
		Limit: defaultPageSize, NextToken: q.Get("nextToken"),
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxPageSize {
			return f, fmt.Errorf("limit must be between 1 and %d: %w", maxPageSize, errdefs.ErrInvalidArgument)
		}
		f.Limit = n
	}
	return f, nil
}

// deleteTemplate is DELETE /templates/{id}: forkbox's templates API only
// deletes snapshots. 204; 404 unknown; 409 a clone's snapshot still used by
// its source or a clone; 403 a built-in template.
func (s *Server) deleteTemplate(w http.ResponseWriter, r *http.Request) {
	if err := s.mgr.DeleteSnapshot(r.Context(), r.PathValue("id")); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// rollbackJSON is CubeSandbox's rollback answer.
type rollbackJSON struct {
	SandboxID  string `json:"sandboxID"`
	SnapshotID string `json:"snapshotID"`
	Status     string `json:"status"`
}

// rollback is POST /sandboxes/{id}/rollback {snapshotID}: the sandbox is
// restored in place (same id) to a snapshot of its lineage and runs. 200
// with {sandboxID, snapshotID, status}; 400 no snapshotID or a snapshot of
// another lineage; 404 unknown sandbox or snapshot; 409 a busy sandbox.
func (s *Server) rollback(w http.ResponseWriter, r *http.Request) {
	var body rollbackBody
	if err := decodeBody(w, r, &body, false); err != nil {
		writeError(w, err)
		return
	}
	sb, err := s.mgr.Rollback(r.Context(), r.PathValue("id"), body.SnapshotID)
	if err != nil {
		writeError(w, err)
		return
	}
	// The snapshot as resolved (body.SnapshotID may be a name).
	snapID := sb.Rollbacks[len(sb.Rollbacks)-1].SnapshotID
	writeJSON(w, http.StatusOK, rollbackJSON{SandboxID: sb.ID, SnapshotID: snapID, Status: string(sb.State.Public())})
}

// lineage is GET /sandboxes/{id}/lineage: the tree (sandbox.LineageNode)
// of sandboxes and snapshots id belongs to, from its root. id may name a
// sandbox (killed ones too) or a snapshot.
func (s *Server) lineage(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	root, err := s.mgr.Lineage(r.Context(), id)
	if err != nil {
		writeError(w, err)
		return
	}
	if root == nil {
		writeError(w, fmt.Errorf("lineage of %q: %w", id, errdefs.ErrNotFound))
		return
	}
	writeJSON(w, http.StatusOK, root)
}
