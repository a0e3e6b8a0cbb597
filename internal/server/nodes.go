package server

import (
	"context"
	"net/http"
	"time"

	"github.com/forkbox/forkbox/internal/cluster"
)

// Nodes is the cluster's node registry (*cluster.Registry).
type Nodes interface {
	List(ctx context.Context) ([]cluster.Node, error)
	Get(ctx context.Context, id string) (cluster.Node, error)
	SetDraining(ctx context.Context, id string, draining bool) (cluster.Node, error)
	// Remove deletes a dead node from the records (ErrConflict while its
	// lease runs or its sandboxes are recorded running).
	Remove(ctx context.Context, id string) error
	// CheckAccepting is nil if this node takes new sandboxes, else an
	// ErrUnavailable that says why.
	CheckAccepting(ctx context.Context) error
	// Place picks the node a new sandbox of a template every node holds
	// goes to (ErrUnavailable if none takes new sandboxes), preferring
	// one whose image cache holds the images want names.
	Place(ctx context.Context, want ...string) (cluster.Placement, error)
}

// nodeJSON is a node as GET /nodes reports it.
type nodeJSON struct {
	NodeID string `json:"nodeID"`
	URL    string `json:"url"`
	// State is alive, draining or dead.
	State    string `json:"state"`
	Draining bool   `json:"draining"`
	// Self is whether it is the node that answered.
	Self          bool      `json:"self"`
	Capacity      int       `json:"capacity"`
	Running       int       `json:"running"`
	FreeMemoryMiB int64     `json:"freeMemoryMiB"`
	CPUs          int       `json:"cpus"`
	Load1         float64   `json:"load1"`
	Version       string    `json:"version"`
	StartedAt     time.Time `json:"startedAt"`
	HeartbeatAt   time.Time `json:"heartbeatAt"`
	LeaseUntil    time.Time `json:"leaseUntil"`
}

func nodeOf(n cluster.Node) nodeJSON {
	return nodeJSON{NodeID: n.ID, URL: n.URL, State: string(n.State), Draining: n.Draining, Self: n.Self,
		Capacity: n.Capacity, Running: n.Running, FreeMemoryMiB: n.FreeMemoryMiB, CPUs: n.CPUs, Load1: n.Load1,
		Version: n.Version, StartedAt: n.StartedAt, HeartbeatAt: n.HeartbeatAt, LeaseUntil: n.LeaseUntil}
}

// nodeRoutes registers the node registry's routes (forkbox's own; E2B's
// cluster API is not public).
func (s *Server) nodeRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /nodes", s.listNodes)
	mux.HandleFunc("GET /nodes/{id}", s.getNode)
	mux.HandleFunc("POST /nodes/{id}/drain", func(w http.ResponseWriter, r *http.Request) { s.setDraining(w, r, true) })
	mux.HandleFunc("POST /nodes/{id}/undrain", func(w http.ResponseWriter, r *http.Request) { s.setDraining(w, r, false) })
	mux.HandleFunc("DELETE /nodes/{id}", s.removeNode)
	mux.HandleFunc("POST /cluster/copies", func(w http.ResponseWriter, r *http.Request) {
		if s.nodesOr501(w, r) {
			s.startCopy(w, r)
		}
	})
}

func (s *Server) nodesOr501(w http.ResponseWriter, r *http.Request) bool {
	if s.cfg.Nodes == nil {
		writeStatus(w, http.StatusNotImplemented, r.Method+" "+r.URL.Path+": this server has no node registry")
		return false
	}
	return true
}

// listNodes is GET /nodes: every node the records hold, dead ones too.
func (s *Server) listNodes(w http.ResponseWriter, r *http.Request) {
	if !s.nodesOr501(w, r) {
		return
	}
	list, err := s.cfg.Nodes.List(r.Context())
	if err != nil {
		writeError(w, err)
		return
	}
	out := make([]nodeJSON, 0, len(list))
	for _, n := range list {
		out = append(out, nodeOf(n))
	}
	writeJSON(w, http.StatusOK, out)
}

// getNode is GET /nodes/{id}; an unknown node is 404.
func (s *Server) getNode(w http.ResponseWriter, r *http.Request) {
	if !s.nodesOr501(w, r) {
		return
	}
	n, err := s.cfg.Nodes.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, nodeOf(n))
}

// setDraining is POST /nodes/{id}/drain and /undrain: 200 with the node.
func (s *Server) setDraining(w http.ResponseWriter, r *http.Request, draining bool) {
	if !s.nodesOr501(w, r) {
		return
	}
	n, err := s.cfg.Nodes.SetDraining(r.Context(), r.PathValue("id"), draining)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, nodeOf(n))
}

// removeNode is DELETE /nodes/{id}: 204 once a dead node is gone from the
// records; 409 while its lease runs or its sandboxes are recorded running.
func (s *Server) removeNode(w http.ResponseWriter, r *http.Request) {
	if !s.nodesOr501(w, r) {
		return
	}
	if err := s.cfg.Nodes.Remove(r.Context(), r.PathValue("id")); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// acceptsNew answers 503 and returns false if this node takes no new
// sandboxes (drained). Creates, forks and clones ask; resumes and
// connects of the node's own sandboxes do not, since until placement
// moves paused work off a drained node it is the only one that can run
// them.
func (s *Server) acceptsNew(w http.ResponseWriter, r *http.Request) bool {
	if s.cfg.Nodes == nil {
		return true
	}
	if err := s.cfg.Nodes.CheckAccepting(r.Context()); err != nil {
		writeError(w, err)
		return false
	}
	return true
}
