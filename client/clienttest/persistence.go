package clienttest

import (
	"net/http"
	"strconv"
	"time"

	"github.com/forkbox/forkbox/client"
)

func (s *Server) findSnapshotLocked(id string) *snapshot {
	for _, sn := range s.snapshots {
		if sn.info.SnapshotID == id {
			return sn
		}
	}
	return nil
}

func (s *Server) snapshot(w http.ResponseWriter, r *http.Request) {
	var b struct {
		Name string `json:"name"`
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
	sn := s.snapshotLocked(sb, b.Name, "snapshot")
	writeJSON(w, http.StatusCreated, sn.info)
}

func (s *Server) snapshotLocked(sb *Sandbox, name, origin string) *snapshot {
	sn := &snapshot{info: client.SnapshotInfo{
		SnapshotID: s.newIDLocked("snap"), Names: []string{}, SandboxID: sb.Info.SandboxID, CreatedAt: now(),
	}, files: copyFiles(sb.Files)}
	if name != "" {
		sn.info.Names = []string{name}
	}
	s.snapshots = append(s.snapshots, sn)
	s.nodes = append(s.nodes, &client.LineageNode{
		ID: sn.info.SnapshotID, Kind: client.KindSnapshot, ParentID: sb.Info.SandboxID,
		Origin: origin, State: "ready", CreatedAt: sn.info.CreatedAt,
	})
	return sn
}

func (s *Server) listSnapshots(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit, _ := strconv.Atoi(q.Get("limit"))
	if limit <= 0 {
		limit = 100
	}
	start, _ := strconv.Atoi(q.Get("nextToken"))
	s.mu.Lock()
	defer s.mu.Unlock()
	var match []client.SnapshotInfo
	for _, sn := range s.snapshots {
		if sb := q.Get("sandboxID"); sb != "" && sn.info.SandboxID != sb {
			continue
		}
		if name := q.Get("name"); name != "" && sn.info.SnapshotID != name && !contains(sn.info.Names, name) {
			continue
		}
		match = append(match, sn.info)
	}
	page := match[min(start, len(match)):]
	if len(page) > limit {
		page = page[:limit]
		w.Header().Set("X-Next-Token", strconv.Itoa(start+limit))
	}
	writeJSON(w, http.StatusOK, append([]client.SnapshotInfo{}, page...))
}

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

func (s *Server) deleteSnapshot(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := r.PathValue("id")
	for i, sn := range s.snapshots {
		if sn.info.SnapshotID == id {
			s.snapshots = append(s.snapshots[:i], s.snapshots[i+1:]...)
			s.setNodeStateLocked(id, "deleted")
			w.WriteHeader(http.StatusNoContent)
			return
		}
	}
	writeError(w, http.StatusNotFound, "snapshot not found")
}

// copiesLocked snapshots src once and starts count sandboxes from it.
func (s *Server) copiesLocked(src *Sandbox, count, timeout int, origin string) (*snapshot, []*Sandbox) {
	sn := s.snapshotLocked(src, "", origin)
	if timeout == 0 {
		timeout = 300
	}
	var out []*Sandbox
	for range count {
		sb := &Sandbox{
			Info:    src.Info,
			Secure:  src.Secure,
			EnvVars: src.EnvVars,
			Files:   copyFiles(sn.files),
		}
		sb.Info.SandboxID = s.newIDLocked("sbx")
		sb.Info.State, sb.Info.StartedAt = "running", now()
		sb.Info.EndAt = now().Add(time.Duration(timeout) * time.Second)
		if src.Secure {
			sb.Token = "tok-" + sb.Info.SandboxID
			sb.Info.EnvdAccessToken = sb.Token
		}
		s.addLocked(sb, sn.info.SnapshotID, origin)
		out = append(out, sb)
	}
	return sn, out
}

type copyBody struct {
	Count   int  `json:"count"`
	Strict  bool `json:"strict"`
	Timeout int  `json:"timeout"`
}

func (s *Server) fork(w http.ResponseWriter, r *http.Request) {
	var b copyBody
	if !decode(w, r, &b) {
		return
	}
	if b.Count < 1 || b.Count > 100 {
		writeError(w, http.StatusBadRequest, "count must be in 1..100")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	src := s.lookupLocked(w, r.PathValue("id"))
	if src == nil {
		return
	}
	_, sbs := s.copiesLocked(src, b.Count, b.Timeout, "fork")
	out := make([]map[string]any, 0, len(sbs))
	for _, sb := range sbs {
		out = append(out, map[string]any{"sandbox": sandboxJSON(sb)})
	}
	writeJSON(w, http.StatusCreated, out)
}

func (s *Server) clone(w http.ResponseWriter, r *http.Request) {
	var b copyBody
	if !decode(w, r, &b) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	src := s.lookupLocked(w, r.PathValue("id"))
	if src == nil {
		return
	}
	sn, sbs := s.copiesLocked(src, b.Count, b.Timeout, "clone")
	list := make([]map[string]any, 0, len(sbs))
	for _, sb := range sbs {
		list = append(list, sandboxJSON(sb))
	}
	writeJSON(w, http.StatusCreated, map[string]any{
		"sandboxes": list, "count": len(list), "snapshotTemplateId": sn.info.SnapshotID,
	})
}

func (s *Server) rollback(w http.ResponseWriter, r *http.Request) {
	var b struct {
		SnapshotID string `json:"snapshotID"`
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
	sn := s.findSnapshotLocked(b.SnapshotID)
	if sn == nil {
		writeError(w, http.StatusNotFound, "snapshot not found")
		return
	}
	sb.Files = copyFiles(sn.files)
	writeJSON(w, http.StatusOK, map[string]string{
		"sandboxID": sb.Info.SandboxID, "snapshotID": sn.info.SnapshotID, "status": "running",
	})
}

// lineage answers the whole tree containing the id, root first.
func (s *Server) lineage(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := r.PathValue("id")
	byID := map[string]*client.LineageNode{}
	for _, n := range s.nodes {
		cp := *n
		cp.Children = nil
		byID[n.ID] = &cp
	}
	if byID[id] == nil {
		writeError(w, http.StatusNotFound, "not found")
		return
	}
	for _, n := range s.nodes {
		if p := byID[n.ParentID]; p != nil {
			p.Children = append(p.Children, byID[n.ID])
		}
	}
	root := byID[id]
	for root.ParentID != "" && byID[root.ParentID] != nil {
		root = byID[root.ParentID]
	}
	writeJSON(w, http.StatusOK, root)
}
