package clienttest

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/forkbox/forkbox/client"
)

// EnvdVersion is the envd version the fake reports.
const EnvdVersion = "0.6.4"

type createBody struct {
	TemplateID    string                  `json:"templateID"`
	Timeout       int                     `json:"timeout"`
	AutoPause     bool                    `json:"autoPause"`
	AutoResume    *struct{ Enabled bool } `json:"autoResume"`
	Secure        bool                    `json:"secure"`
	AllowInternet *bool                   `json:"allow_internet_access"`
	Metadata      map[string]string       `json:"metadata"`
	EnvVars       map[string]string       `json:"envVars"`
	CPUCount      int                     `json:"cpuCount"`
	MemoryMB      int                     `json:"memoryMB"`
}

func (s *Server) create(w http.ResponseWriter, r *http.Request) {
	var b createBody
	if !decode(w, r, &b) {
		return
	}
	if b.TemplateID == "" {
		writeError(w, http.StatusBadRequest, "templateID is required")
		return
	}
	if b.Timeout == 0 {
		b.Timeout = 300
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	files, parent, origin := map[string][]byte{}, "", "create"
	if snap := s.findSnapshotLocked(b.TemplateID); snap != nil {
		files, parent, origin = copyFiles(snap.files), snap.info.SnapshotID, "restore"
	}
	sb := &Sandbox{
		Info: client.SandboxInfo{
			SandboxID: s.newIDLocked("sbx"), TemplateID: b.TemplateID, ClientID: "fake",
			State: "running", StartedAt: now(), EndAt: now().Add(time.Duration(b.Timeout) * time.Second),
			CPUCount: max(b.CPUCount, 2), MemoryMB: max(b.MemoryMB, 512), EnvdVersion: EnvdVersion,
			Metadata: b.Metadata,
		},
		Secure: b.Secure, AutoPause: b.AutoPause, EnvVars: b.EnvVars, Files: files,
	}
	if b.Secure {
		sb.Token = "tok-" + sb.Info.SandboxID
		sb.Info.EnvdAccessToken = sb.Token
	}
	s.addLocked(sb, parent, origin)
	writeJSON(w, http.StatusCreated, sandboxJSON(sb))
}

// sandboxJSON is the create/connect answer, with domain null as forkbox
// sends it.
func sandboxJSON(sb *Sandbox) map[string]any {
	return map[string]any{
		"sandboxID": sb.Info.SandboxID, "templateID": sb.Info.TemplateID, "clientID": "fake",
		"envdVersion": EnvdVersion, "envdAccessToken": sb.Token, "trafficAccessToken": nil,
		"domain": nil,
	}
}

func (s *Server) get(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sb := s.lookupLocked(w, r.PathValue("id")); sb != nil {
		writeJSON(w, http.StatusOK, sb.Info)
	}
}

// list serves GET /v2/sandboxes; the page token is the index to start at.
func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	states := splitCSV(q.Get("state"))
	md, err := url.ParseQuery(q.Get("metadata"))
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad metadata filter")
		return
	}
	limit, _ := strconv.Atoi(q.Get("limit"))
	if limit <= 0 || limit > 100 {
		limit = 100
	}
	start, _ := strconv.Atoi(q.Get("nextToken"))
	s.mu.Lock()
	defer s.mu.Unlock()
	var match []client.SandboxInfo
	for _, id := range s.order {
		sb, ok := s.sandboxes[id]
		if !ok || (len(states) > 0 && !slices.Contains(states, sb.Info.State)) || !hasMetadata(sb.Info.Metadata, md) {
			continue
		}
		match = append(match, sb.Info)
	}
	page := match[min(start, len(match)):]
	if len(page) > limit {
		page = page[:limit]
		w.Header().Set("X-Next-Token", strconv.Itoa(start+limit))
	}
	writeJSON(w, http.StatusOK, append([]client.SandboxInfo{}, page...))
}

func hasMetadata(have map[string]string, want url.Values) bool {
	for k := range want {
		if have[k] != want.Get(k) {
			return false
		}
	}
	return true
}

func (s *Server) kill(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := r.PathValue("id")
	if s.lookupLocked(w, id) == nil {
		return
	}
	delete(s.sandboxes, id)
	s.setNodeStateLocked(id, "killed")
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) setNodeStateLocked(id, state string) {
	for _, n := range s.nodes {
		if n.ID == id {
			n.State = state
		}
	}
}

func (s *Server) timeout(w http.ResponseWriter, r *http.Request) {
	var b struct {
		Timeout int `json:"timeout"`
	}
	if !decode(w, r, &b) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if sb := s.lookupLocked(w, r.PathValue("id")); sb != nil {
		sb.Info.EndAt = now().Add(time.Duration(b.Timeout) * time.Second)
		w.WriteHeader(http.StatusNoContent)
	}
}

func (s *Server) refresh(w http.ResponseWriter, r *http.Request) {
	var b struct {
		Duration int `json:"duration"`
	}
	if !decode(w, r, &b) {
		return
	}
	if b.Duration > 3600 {
		writeError(w, http.StatusBadRequest, "duration must be at most 3600")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if sb := s.lookupLocked(w, r.PathValue("id")); sb != nil {
		if end := now().Add(time.Duration(b.Duration) * time.Second); end.After(sb.Info.EndAt) {
			sb.Info.EndAt = end
		}
		w.WriteHeader(http.StatusNoContent)
	}
}

func (s *Server) connect(w http.ResponseWriter, r *http.Request) {
	var b struct {
		Timeout int `json:"timeout"`
	}
	if !decode(w, r, &b) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sb := s.lookupLocked(w, r.PathValue("id"))
	if sb == nil {
		return
	}
	status := http.StatusOK
	if sb.Info.State == "paused" {
		status = http.StatusCreated
		sb.Info.State = "running"
		s.setNodeStateLocked(sb.Info.SandboxID, "running")
	}
	sb.Info.EndAt = now().Add(time.Duration(b.Timeout) * time.Second)
	writeJSON(w, status, sandboxJSON(sb))
}

func (s *Server) pause(w http.ResponseWriter, r *http.Request) {
	var b struct {
		Memory *bool `json:"memory"`
	}
	if !decode(w, r, &b) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sb := s.lookupLocked(w, r.PathValue("id"))
	if sb == nil {
		return
	}
	if sb.Info.State == "paused" {
		writeError(w, http.StatusConflict, "sandbox is already paused")
		return
	}
	sb.Info.State = "paused"
	s.setNodeStateLocked(sb.Info.SandboxID, "paused")
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) metrics(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sb := s.lookupLocked(w, r.PathValue("id"))
	if sb == nil {
		return
	}
	writeJSON(w, http.StatusOK, []map[string]any{{
		"timestamp": now().Format(time.RFC3339), "timestampUnix": now().Unix(),
		"cpuCount": sb.Info.CPUCount, "cpuUsedPct": 12.5, "memUsed": 100 << 20,
		"memTotal": sb.Info.MemoryMB << 20, "memCache": 0, "diskUsed": 1 << 30, "diskTotal": 4 << 30,
	}})
}
