package server

import (
	"net/http"
)

// templateTags is GET /templates/{id}/tags → [{tag, buildID, createdAt}].
func (s *Server) templateTags(w http.ResponseWriter, r *http.Request) {
	tags, err := s.cfg.Templates.Tags(r.Context(), r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, tags)
}

// assignTemplateTags is POST /templates/tags {target: "name:tag", tags} →
// 201 {tags, buildID}: the tags now name target's build.
func (s *Server) assignTemplateTags(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Target string   `json:"target"`
		Tags   []string `json:"tags"`
	}
	if err := decodeBody(w, r, &body, false); err != nil {
		writeError(w, err)
		return
	}
	buildID, err := s.cfg.Templates.AssignTags(r.Context(), body.Target, body.Tags)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, map[string]any{"tags": body.Tags, "buildID": buildID})
}

// removeTemplateTags is DELETE /templates/tags {name, tags} → 204.
func (s *Server) removeTemplateTags(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Name string   `json:"name"`
		Tags []string `json:"tags"`
	}
	if err := decodeBody(w, r, &body, false); err != nil {
		writeError(w, err)
		return
	}
	if err := s.cfg.Templates.RemoveTags(r.Context(), body.Name, body.Tags); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
