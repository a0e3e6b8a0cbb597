package server

import (
	"bytes"
	"fmt"
	"net/http"
	"strconv"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/fsdiff"
	"github.com/forkbox/forkbox/internal/sandbox"
)

// diffRoutes mounts diff and apply: a diff of a sandbox or snapshot
// (either route takes either id), an apply into a running sandbox.
func (s *Server) diffRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /sandboxes/{id}/diff", s.diff)
	mux.HandleFunc("GET /snapshots/{id}/diff", s.diff)
	mux.HandleFunc("POST /sandboxes/{id}/apply", s.apply)
}

// diffOptions reads a diff's query: against, path and exclude (repeated
// globs), limit, cursor, defaults=false (no default excludes).
func diffOptions(r *http.Request) (sandbox.DiffOptions, error) {
	q := r.URL.Query()
	o := sandbox.DiffOptions{Against: q.Get("against")}
	o.Include, o.Exclude, o.After = q["path"], q["exclude"], q.Get("cursor")
	o.NoDefaults = q.Get("defaults") == "false"
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > fsdiff.MaxLimit {
			return o, fmt.Errorf("limit %q: want 1..%d: %w", v, fsdiff.MaxLimit, errdefs.ErrInvalidArgument)
		}
		o.Limit = n
	}
	switch f := q.Get("format"); f {
	case "", "json", "patch":
	default:
		return o, fmt.Errorf("format %q: want json or patch: %w", f, errdefs.ErrInvalidArgument)
	}
	return o, nil
}

// diff is GET /sandboxes/{id}/diff and GET /snapshots/{id}/diff
// ?against=<sandbox|snapshot|template>&path=&exclude=&limit=&cursor=
// &format=json|patch: the filesystem changes since against (default: the
// lineage parent), a page at a time. JSON answers {id, against,
// changes, next}; format=patch a unified diff. Both send the next page's
// cursor in X-Next-Token. 404 unknown ids, 400 bad filters, 409 a
// sandbox busy with another operation.
func (s *Server) diff(w http.ResponseWriter, r *http.Request) {
	o, err := diffOptions(r)
	if err != nil {
		writeError(w, err)
		return
	}
	id := r.PathValue("id")
	if r.URL.Query().Get("format") == "patch" {
		s.diffPatch(w, r, id, o)
		return
	}
	d, err := s.mgr.Diff(r.Context(), id, o)
	if err != nil {
		writeError(w, err)
		return
	}
	if d.Changes == nil {
		d.Changes = []fsdiff.Change{}
	}
	if d.Next != "" {
		w.Header().Set("X-Next-Token", d.Next)
	}
	writeJSON(w, http.StatusOK, d)
}

// diffPatch answers format=patch. The patch is made whole before it is
// sent (a page of it), so a failure is still a clean error status.
func (s *Server) diffPatch(w http.ResponseWriter, r *http.Request, id string, o sandbox.DiffOptions) {
	var buf patchBuffer
	if o.Limit == 0 {
		o.Limit = defaultPatchLimit
	}
	next, err := s.mgr.DiffPatch(r.Context(), id, o, &buf)
	if err != nil {
		writeError(w, err)
		return
	}
	if next != "" {
		w.Header().Set("X-Next-Token", next)
	}
	w.Header().Set("Content-Type", "text/x-diff; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	w.Write(buf.Bytes())
}

// applyBody is POST /sandboxes/{id}/apply's body.
type applyBody struct {
	From     string   `json:"from"`
	Base     string   `json:"base,omitempty"`
	Paths    []string `json:"paths,omitempty"`
	Strategy string   `json:"strategy,omitempty"`
	DryRun   bool     `json:"dryRun,omitempty"`
}

// apply is POST /sandboxes/{id}/apply {from, base?, paths?, strategy?,
// dryRun?}: brings from's file changes since base (default: the common
// ancestor) into running sandbox id, all or nothing; answers what was
// applied and the conflicts left (or settled by strategy theirs|ours).
// 404 unknown ids, 400 no common ancestor and no base, bad paths or
// strategy; 409 a paused or busy sandbox, or a change that could not be
// written (nothing applied).
func (s *Server) apply(w http.ResponseWriter, r *http.Request) {
	var body applyBody
	if err := decodeBody(w, r, &body, false); err != nil {
		writeError(w, err)
		return
	}
	res, err := s.mgr.Apply(r.Context(), r.PathValue("id"), sandbox.ApplyOptions{
		From: body.From, Base: body.Base, Paths: body.Paths, Strategy: body.Strategy, DryRun: body.DryRun,
	})
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// maxPatchPage bounds a patch page held before it is sent; a bigger page
// asks for a smaller limit instead of growing the daemon.
const maxPatchPage = 64 << 20

// defaultPatchLimit is a patch page's size when the request names none:
// a patch holds contents, a listing only names.
const defaultPatchLimit = 100

// patchBuffer is a byte buffer that refuses to grow past maxPatchPage.
type patchBuffer struct{ bytes.Buffer }

func (b *patchBuffer) Write(p []byte) (int, error) {
	if b.Len()+len(p) > maxPatchPage {
		return 0, fmt.Errorf("patch page is larger than %d MiB: ask for a smaller limit: %w", maxPatchPage>>20, errdefs.ErrInvalidArgument)
	}
	return b.Buffer.Write(p)
}
