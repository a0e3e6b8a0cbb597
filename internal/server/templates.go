package server

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/template/build"
)

// templateRoutes are E2B's template build API (templates_build.go) and
// template listing; without Config.Templates they answer 501.
func (s *Server) templateRoutes(mux *http.ServeMux) {
	for _, rt := range []struct {
		pattern string
		h       http.HandlerFunc
	}{
		{"POST /v3/templates", s.requestTemplateBuild},
		{"GET /templates/{id}/files/{hash}", s.templateFileLink},
		{"PUT /templates/{id}/files/{hash}", s.templateFileUpload},
		{"POST /v2/templates/{id}/builds/{buildID}", s.startTemplateBuild},
		{"GET /templates/{id}/builds/{buildID}/status", s.templateBuildStatus},
		{"GET /templates/{id}/builds/{buildID}/logs", s.templateBuildLogs},
		{"GET /templates", s.listTemplates},
		{"GET /v2/templates", s.listTemplates},
		{"GET /templates/{id}", s.getTemplate},
		{"POST /templates/tags", s.assignTemplateTags},
		{"DELETE /templates/tags", s.removeTemplateTags},
		// GET /templates/aliases/{alias} and GET /templates/{id}/tags
		// overlap as patterns: one route tells them apart.
		{"GET /templates/{id}/{sub}", s.templateSub},
	} {
		h := rt.h
		mux.HandleFunc(rt.pattern, func(w http.ResponseWriter, r *http.Request) {
			if s.cfg.Templates == nil {
				s.notImplemented(w, r)
				return
			}
			if s.forwardTemplate(w, r) { // templates_home.go
				return
			}
			h(w, r)
		})
	}
}

// templateSub routes GET /templates/aliases/{alias} and /templates/{id}/tags.
func (s *Server) templateSub(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.PathValue("id") == "aliases":
		s.templateAlias(w, r, r.PathValue("sub"))
	case r.PathValue("sub") == "tags":
		s.templateTags(w, r)
	default:
		s.notFound(w, r)
	}
}

// templateCreatedJSON is TemplateRequestResponseV3.
type templateCreatedJSON struct {
	TemplateID string   `json:"templateID"`
	BuildID    string   `json:"buildID"`
	Names      []string `json:"names"`
	Aliases    []string `json:"aliases"`
	Tags       []string `json:"tags"`
	Public     bool     `json:"public"`
}

// requestTemplateBuild is POST /v3/templates {name[:tag], tags, cpuCount,
// memoryMB} → 202 {templateID, buildID, names, tags}.
func (s *Server) requestTemplateBuild(w http.ResponseWriter, r *http.Request) {
	var body struct {
		build.Request
		Alias string `json:"alias"`
	}
	if err := decodeBody(w, r, &body, false); err != nil {
		writeError(w, err)
		return
	}
	if body.Name == "" {
		body.Name = body.Alias
	}
	rec, buildID, err := s.cfg.Templates.RequestBuild(r.Context(), body.Request)
	if err != nil {
		writeError(w, err)
		return
	}
	tags := []string{}
	if n := len(rec.Builds); n > 0 {
		tags = rec.Builds[n-1].Tags
	}
	writeJSON(w, http.StatusAccepted, templateCreatedJSON{
		TemplateID: rec.ID, BuildID: buildID, Names: rec.Names, Aliases: rec.Names, Tags: tags,
	})
}

// templateFileLink is GET /templates/{id}/files/{hash}: 201 {present, url,
// headers}. The upload URL is this daemon's own PUT route, authorised by
// the caller's own API key passed back as a header for the SDK to send.
func (s *Server) templateFileLink(w http.ResponseWriter, r *http.Request) {
	id, hash := r.PathValue("id"), r.PathValue("hash")
	tplID, present, err := s.cfg.Templates.Files(r.Context(), id, hash)
	if err != nil {
		writeError(w, err)
		return
	}
	out := struct {
		Present bool              `json:"present"`
		URL     string            `json:"url,omitempty"`
		Headers map[string]string `json:"headers,omitempty"`
	}{Present: present}
	if !out.Present {
		scheme := "http"
		if r.TLS != nil {
			scheme = "https"
		}
		out.URL = fmt.Sprintf("%s://%s/templates/%s/files/%s", scheme, r.Host, tplID, hash)
		out.Headers = map[string]string{"X-API-Key": r.Header.Get("X-API-Key")}
	}
	writeJSON(w, http.StatusCreated, out)
}

// templateFileUpload is PUT /templates/{id}/files/{hash}: the build
// context's tar (gzip'd or not), checked and unpacked as the template's
// own (a second upload of the hash with other files is 409).
func (s *Server) templateFileUpload(w http.ResponseWriter, r *http.Request) {
	if err := s.cfg.Templates.PutFiles(r.Context(), r.PathValue("id"), r.PathValue("hash"), r.Body); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusCreated)
}

// startTemplateBuild is POST /v2/templates/{id}/builds/{buildID}: 202, the
// build runs in the background (its status route follows it).
func (s *Server) startTemplateBuild(w http.ResponseWriter, r *http.Request) {
	var spec build.Spec
	if err := decodeBody(w, r, &spec, false); err != nil {
		writeError(w, err)
		return
	}
	if err := s.cfg.Templates.Start(r.Context(), r.PathValue("id"), r.PathValue("buildID"), spec); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusAccepted)
}

// maxLogPage bounds the log entries of one status or logs answer.
const maxLogPage = 100

// buildInfoJSON is TemplateBuildInfo.
type buildInfoJSON struct {
	TemplateID string           `json:"templateID"`
	BuildID    string           `json:"buildID"`
	Status     string           `json:"status"`
	LogEntries []build.LogEntry `json:"logEntries"`
	Logs       []string         `json:"logs"`
	Reason     *build.Reason    `json:"reason,omitempty"`
}

// buildLogQuery is what the status and logs routes share: the build,
// its log entries at the asked level or above, and the page limit.
type buildLogQuery struct {
	build   *build.Build
	entries []build.LogEntry
	limit   int
	q       url.Values
}

// parseBuildLogQuery fetches the build of the request's path and reads
// its level and limit parameters.
func (s *Server) parseBuildLogQuery(r *http.Request) (*buildLogQuery, error) {
	b, err := s.cfg.Templates.Status(r.Context(), r.PathValue("id"), r.PathValue("buildID"))
	if err != nil {
		return nil, err
	}
	q := r.URL.Query()
	limit, err := intParam(q.Get("limit"), maxLogPage)
	if err != nil {
		return nil, err
	}
	return &buildLogQuery{build: b, entries: filterLevel(b.Logs, q.Get("level")), limit: min(limit, maxLogPage), q: q}, nil
}

// templateBuildStatus is GET …/builds/{buildID}/status?logsOffset&limit&level.
func (s *Server) templateBuildStatus(w http.ResponseWriter, r *http.Request) {
	lq, err := s.parseBuildLogQuery(r)
	if err != nil {
		writeError(w, err)
		return
	}
	offset, err := intParam(lq.q.Get("logsOffset"), 0)
	if err != nil {
		writeError(w, err)
		return
	}
	b, page := lq.build, pageOf(lq.entries, offset, lq.limit)
	out := buildInfoJSON{TemplateID: r.PathValue("id"), BuildID: b.ID, Status: b.Status, LogEntries: page, Logs: []string{}, Reason: b.Reason}
	for _, e := range page {
		out.Logs = append(out.Logs, e.Timestamp.Format(time.RFC3339)+" "+e.Message)
	}
	writeJSON(w, http.StatusOK, out)
}

// templateBuildLogs is GET …/builds/{buildID}/logs?cursor&limit&direction&level.
func (s *Server) templateBuildLogs(w http.ResponseWriter, r *http.Request) {
	lq, err := s.parseBuildLogQuery(r)
	if err != nil {
		writeError(w, err)
		return
	}
	cursor, err := intParam(lq.q.Get("cursor"), 0)
	if err != nil {
		writeError(w, err)
		return
	}
	var sel []build.LogEntry
	backward := lq.q.Get("direction") == "backward"
	for _, e := range lq.entries {
		ms := e.Timestamp.UnixMilli()
		if cursor == 0 || (!backward && ms >= int64(cursor)) || (backward && ms <= int64(cursor)) {
			sel = append(sel, e)
		}
	}
	if backward && len(sel) > lq.limit {
		sel = sel[len(sel)-lq.limit:]
	}
	writeJSON(w, http.StatusOK, map[string]any{"logs": pageOf(sel, 0, lq.limit)})
}

func intParam(v string, def int) (int, error) {
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%q is not a non-negative integer: %w", v, errdefs.ErrInvalidArgument)
	}
	return n, nil
}

var levelRank = map[string]int{"debug": 0, "info": 1, "warn": 2, "error": 3}

// filterLevel keeps entries at level or above ("" keeps all).
func filterLevel(in []build.LogEntry, level string) []build.LogEntry {
	min, ok := levelRank[level]
	if !ok {
		return in
	}
	var out []build.LogEntry
	for _, e := range in {
		if levelRank[e.Level] >= min {
			out = append(out, e)
		}
	}
	return out
}

func pageOf(in []build.LogEntry, offset, limit int) []build.LogEntry {
	if offset >= len(in) {
		return []build.LogEntry{}
	}
	in = in[offset:]
	if len(in) > limit {
		in = in[:limit]
	}
	return in
}
