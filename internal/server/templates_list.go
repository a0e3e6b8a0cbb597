package server

import (
	"net/http"
	"time"

	"github.com/forkbox/forkbox/internal/template/build"
)

// templateJSON is E2B's Template (listing).
type templateJSON struct {
	TemplateID    string      `json:"templateID"`
	BuildID       string      `json:"buildID"`
	BuildStatus   string      `json:"buildStatus"`
	BuildCount    int         `json:"buildCount"`
	CPUCount      int         `json:"cpuCount"`
	MemoryMB      int         `json:"memoryMB"`
	DiskSizeMB    int         `json:"diskSizeMB"`
	EnvdVersion   string      `json:"envdVersion"`
	Public        bool        `json:"public"`
	Aliases       []string    `json:"aliases"`
	Names         []string    `json:"names"`
	CreatedAt     time.Time   `json:"createdAt"`
	UpdatedAt     time.Time   `json:"updatedAt"`
	CreatedBy     any         `json:"createdBy"`
	LastSpawnedAt *time.Time  `json:"lastSpawnedAt"`
	SpawnCount    int         `json:"spawnCount"`
	Builds        []buildJSON `json:"builds,omitempty"`
}

// buildJSON is E2B's TemplateBuild.
type buildJSON struct {
	BuildID    string     `json:"buildID"`
	Status     string     `json:"status"`
	CPUCount   int        `json:"cpuCount"`
	MemoryMB   int        `json:"memoryMB"`
	DiskSizeMB int        `json:"diskSizeMB"`
	CreatedAt  time.Time  `json:"createdAt"`
	UpdatedAt  time.Time  `json:"updatedAt"`
	FinishedAt *time.Time `json:"finishedAt,omitempty"`
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// builtinJSON renders a template forkbox ships (base, code interpreter).
func builtinJSON(t *build.BuiltinInfo) templateJSON {
	return templateJSON{
		TemplateID: t.ID, BuildID: t.Version, BuildStatus: build.StatusReady, BuildCount: 1,
		CPUCount: t.CPUCount, MemoryMB: t.MemoryMB, DiskSizeMB: t.DiskSizeMB, EnvdVersion: "0.6.4",
		Aliases: nonNil(t.Aliases), Names: append([]string{t.ID}, t.Aliases...), CreatedAt: t.CreatedAt, UpdatedAt: t.CreatedAt,
	}
}

// recordJSON renders a user-built template; withBuilds adds its builds.
func recordJSON(r *build.Record, withBuilds bool) templateJSON {
	out := templateJSON{
		TemplateID: r.ID, CPUCount: r.CPUCount, MemoryMB: r.MemoryMB, DiskSizeMB: 1024, EnvdVersion: "0.6.4",
		Aliases: nonNil(r.Names), Names: nonNil(r.Names), CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
		BuildCount: len(r.Builds), BuildStatus: build.StatusWaiting,
	}
	if out.CPUCount == 0 {
		out.CPUCount = 2
	}
	if out.MemoryMB == 0 {
		out.MemoryMB = 1024
	}
	if n := len(r.Builds); n > 0 {
		out.BuildID, out.BuildStatus = r.Builds[n-1].ID, r.Builds[n-1].Status
	}
	if withBuilds {
		out.Builds = []buildJSON{}
		for _, b := range r.Builds {
			bj := buildJSON{BuildID: b.ID, Status: b.Status, CPUCount: out.CPUCount, MemoryMB: out.MemoryMB, DiskSizeMB: 1024, CreatedAt: b.CreatedAt, UpdatedAt: b.CreatedAt}
			if !b.FinishedAt.IsZero() {
				f := b.FinishedAt
				bj.FinishedAt, bj.UpdatedAt = &f, f
			}
			out.Builds = append(out.Builds, bj)
		}
	}
	return out
}

// listTemplates is GET /templates and GET /v2/templates: the built-in
// templates, then the user-built ones, oldest first.
func (s *Server) listTemplates(w http.ResponseWriter, r *http.Request) {
	tpls, err := s.cfg.Templates.Builtins(r.Context())
	if err != nil {
		writeError(w, err)
		return
	}
	out := []templateJSON{}
	for _, t := range tpls {
		out = append(out, builtinJSON(t))
	}
	for _, rec := range s.cfg.Templates.List(r.Context()) {
		out = append(out, recordJSON(rec, false))
	}
	writeJSON(w, http.StatusOK, out)
}

// getTemplate is GET /templates/{id}: the template with its builds.
func (s *Server) getTemplate(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if rec, err := s.cfg.Templates.Get(r.Context(), id); err == nil {
		writeJSON(w, http.StatusOK, recordJSON(rec, true))
		return
	}
	t, err := s.cfg.Templates.Builtin(r.Context(), id)
	if err != nil {
		writeError(w, err)
		return
	}
	out := builtinJSON(t)
	out.Builds = []buildJSON{{BuildID: t.Version, Status: build.StatusReady, CPUCount: t.CPUCount, MemoryMB: t.MemoryMB, DiskSizeMB: t.DiskSizeMB, CreatedAt: t.CreatedAt, UpdatedAt: t.CreatedAt}}
	writeJSON(w, http.StatusOK, out)
}

// templateAlias is GET /templates/aliases/{alias} (Template.exists): 200
// {templateID, public} or 404.
func (s *Server) templateAlias(w http.ResponseWriter, r *http.Request, alias string) {
	if rec, err := s.cfg.Templates.Get(r.Context(), alias); err == nil {
		writeJSON(w, http.StatusOK, map[string]any{"templateID": rec.ID, "public": false})
		return
	}
	t, err := s.cfg.Templates.Builtin(r.Context(), alias)
	if err != nil {
		writeStatus(w, http.StatusNotFound, "template '"+alias+"' not found")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"templateID": t.ID, "public": true})
}

// deleteAnyTemplate is DELETE /templates/{id}: a user-built template (its
// files stay while sandboxes and snapshots use them), else a snapshot.
func (s *Server) deleteAnyTemplate(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Templates != nil {
		if s.forwardTemplate(w, r) { // a user template homed on another node
			return
		}
		if _, err := s.cfg.Templates.Get(r.Context(), r.PathValue("id")); err == nil {
			if err := s.cfg.Templates.Delete(r.Context(), r.PathValue("id")); err != nil {
				writeError(w, err)
				return
			}
			w.WriteHeader(http.StatusNoContent)
			return
		}
	}
	s.deleteTemplate(w, r)
}
