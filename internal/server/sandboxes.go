package server

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/sandbox"
)

// createV1 is POST /sandboxes: envd access is secured only on request.
func (s *Server) createV1(w http.ResponseWriter, r *http.Request) { s.create(w, r, false) }

// createV2 is POST /v2/sandboxes: envd access is always secured.
func (s *Server) createV2(w http.ResponseWriter, r *http.Request) { s.create(w, r, true) }

// create starts a sandbox and answers 201 with the Sandbox shape.
func (s *Server) create(w http.ResponseWriter, r *http.Request, alwaysSecure bool) {
	raw, err := readBody(w, r)
	if err != nil {
		writeError(w, err)
		return
	}
	// Decoded once: placement needs the template, and a body it cannot
	// decode is answered here, after the drain check as before.
	var body createBody
	derr := decodeJSON(raw, &body, false)
	if derr == nil && (s.forwardCreate(w, r, raw, body) || s.placeCreate(w, r, raw, body.TemplateID)) {
		return
	}
	if !s.acceptsNew(w, r) {
		return
	}
	if derr != nil {
		writeError(w, derr)
		return
	}
	req, err := body.request(alwaysSecure)
	if err != nil {
		writeError(w, err)
		return
	}
	sb, err := s.mgr.Create(r.Context(), req)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, s.toSandboxJSON(sb))
}

// getSandbox is GET /sandboxes/{id}.
func (s *Server) getSandbox(w http.ResponseWriter, r *http.Request) {
	sb, err := s.mgr.Describe(r.Context(), r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, s.toDetail(sb))
}

// connect is POST /sandboxes/{id}/connect (and its v2 twin): it makes
// sure the sandbox runs. A running sandbox answers 200 and has its deadline
// extended (never shortened) to now + timeout (default 300 s); a paused one
// — or one being paused, once that completes — is resumed with the
// deadline now + timeout and answers 201. Both with the Sandbox shape.
// memory: false (connect({onResume: 'reboot'})) resumes a paused sandbox
// by cold-booting its files, whatever kind of pause it had.
func (s *Server) connect(w http.ResponseWriter, r *http.Request) {
	var body connectBody
	if err := decodeBody(w, r, &body, true); err != nil {
		writeError(w, err)
		return
	}
	d, err := optionalSeconds("timeout", body.Timeout)
	if err != nil {
		writeError(w, err)
		return
	}
	connect := s.mgr.Connect
	if body.Memory != nil && !*body.Memory {
		connect = s.mgr.ConnectReboot // onResume: 'reboot'
	}
	sb, resumed, err := connect(r.Context(), r.PathValue("id"), d)
	if err != nil {
		writeError(w, err)
		return
	}
	status := http.StatusOK
	if resumed {
		status = http.StatusCreated
	}
	writeJSON(w, status, s.toSandboxJSON(sb))
}

// listV1 is GET /sandboxes: running sandboxes, optionally by metadata.
func (s *Server) listV1(w http.ResponseWriter, r *http.Request) {
	md, err := parseMetadataQuery(r.URL.Query().Get("metadata"))
	if err != nil {
		writeError(w, err)
		return
	}
	sbs, _, err := s.mgr.List(r.Context(), sandbox.ListFilter{States: []sandbox.PublicState{sandbox.PublicRunning}, Metadata: md})
	if err != nil {
		writeError(w, err)
		return
	}
	writeListed(w, sbs)
}

// listV2 is GET /v2/sandboxes: paginated (newest first unless order=asc),
// filtered by state, metadata, template and start time; the next page's
// token is sent in the X-Next-Token header, the number of running
// sandboxes in X-Total-Running.
func (s *Server) listV2(w http.ResponseWriter, r *http.Request) {
	f, err := parseListFilter(r.URL.Query())
	if err != nil {
		writeError(w, err)
		return
	}
	sbs, next, err := s.mgr.List(r.Context(), f)
	if err != nil {
		writeError(w, err)
		return
	}
	if next != "" {
		w.Header().Set("X-Next-Token", next)
	}
	if err := s.setTotalRunning(r.Context(), w.Header()); err != nil {
		writeError(w, err)
		return
	}
	writeListed(w, sbs)
}

func writeListed(w http.ResponseWriter, sbs []*sandbox.Sandbox) {
	out := make([]listedJSON, 0, len(sbs))
	for _, sb := range sbs {
		out = append(out, toListed(sb))
	}
	writeJSON(w, http.StatusOK, out)
}

// Page sizes of GET /v2/sandboxes.
const (
	defaultPageSize = 100
	maxPageSize     = 100
)

// parseListFilter reads the v2 listing's query: metadata, state (comma
// separated or repeated), limit (1..100, default 100), nextToken and
// those of parseListOrder.
func parseListFilter(q url.Values) (sandbox.ListFilter, error) {
	md, err := parseMetadataQuery(q.Get("metadata"))
	if err != nil {
		return sandbox.ListFilter{}, err
	}
	order, err := parseListOrder(q)
	if err != nil {
		return sandbox.ListFilter{}, err
	}
	f := sandbox.ListFilter{Metadata: md, Limit: defaultPageSize, NextToken: q.Get("nextToken"), ListOrder: order}
	for _, v := range q["state"] {
		for st := range strings.SplitSeq(v, ",") {
			switch ps := sandbox.PublicState(strings.TrimSpace(st)); ps {
			case "":
			case sandbox.PublicRunning, sandbox.PublicPaused:
				f.States = append(f.States, ps)
			default:
				return sandbox.ListFilter{}, fmt.Errorf("unknown state %q: %w", strings.TrimSpace(st), errdefs.ErrInvalidArgument)
			}
		}
	}
	if len(f.States) == 0 {
		f.States = []sandbox.PublicState{sandbox.PublicRunning, sandbox.PublicPaused} // never the transient killing
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxPageSize {
			return sandbox.ListFilter{}, fmt.Errorf("limit must be between 1 and %d: %w", maxPageSize, errdefs.ErrInvalidArgument)
		}
		f.Limit = n
	}
	return f, nil
}

// parseMetadataQuery decodes the metadata filter "k=v&k2=v2". SDKs
// URL-encode each key and value before joining them, so both are decoded
// once more after the pairs are split.
func parseMetadataQuery(raw string) (map[string]string, error) {
	if raw == "" {
		return nil, nil
	}
	pairs, err := url.ParseQuery(raw)
	if err != nil {
		return nil, fmt.Errorf("bad metadata query %q: %w", raw, errdefs.ErrInvalidArgument)
	}
	md := make(map[string]string, len(pairs))
	for k, vs := range pairs {
		if len(vs) == 0 {
			continue
		}
		md[unescapeOnce(k)] = unescapeOnce(vs[len(vs)-1])
	}
	return md, nil
}

func unescapeOnce(s string) string {
	if u, err := url.QueryUnescape(s); err == nil {
		return u
	}
	return s
}
