package server

import "net/http"

// routes is the control API's route table (Go 1.22 patterns). Operations
// forkbox does not have yet answer 501 (s.notImplemented).
func (s *Server) routes() *http.ServeMux {
	mux := http.NewServeMux()
	for _, rt := range []struct {
		pattern string
		h       http.HandlerFunc
	}{
		{"GET /health", s.health},

		// Lifecycle (sandboxes.go, lifecycle.go).
		{"POST /sandboxes", s.createV1},
		{"POST /v2/sandboxes", s.createV2},
		{"GET /sandboxes", s.listV1},
		{"GET /v2/sandboxes", s.listV2},
		{"GET /sandboxes/{id}", s.getSandbox},
		{"DELETE /sandboxes/{id}", s.killSandbox},
		{"POST /sandboxes/{id}/timeout", s.setTimeout},
		{"POST /sandboxes/{id}/refreshes", s.refresh},
		{"POST /sandboxes/{id}/connect", s.connect},
		{"POST /v2/sandboxes/{id}/connect", s.connect},

		// Observability (metrics.go).
		{"GET /sandboxes/{id}/metrics", s.metrics},
		{"GET /sandboxes/metrics", s.metricsMany},
		{"GET /sandboxes/{id}/logs", s.logsV1},
		{"GET /v2/sandboxes/{id}/logs", s.logsV2},

		// Persistence (persistence.go, snapshots.go, clone.go).
		{"POST /sandboxes/{id}/pause", s.pause},
		{"POST /sandboxes/{id}/resume", s.resume},
		{"POST /sandboxes/{id}/snapshots", s.createSnapshot},
		{"GET /snapshots", s.listSnapshots},
		{"DELETE /templates/{id}", s.deleteAnyTemplate},
		{"POST /sandboxes/{id}/fork", s.fork},
		{"POST /sandboxes/{id}/clone", s.clone},
		{"POST /sandboxes/{id}/rollback", s.rollback},
		{"GET /sandboxes/{id}/lineage", s.lineage},

		// Egress rules (network.go).
		{"PUT /sandboxes/{id}/network", s.updateNetwork},
		{"GET /sandboxes/{id}/network", s.networkStatus}, // network_status.go

		{"GET /metrics", s.serveMetrics},

		{"/", s.notFound},
	} {
		mux.HandleFunc(rt.pattern, rt.h)
	}
	s.templateRoutes(mux) // templates.go
	s.secretRoutes(mux)   // secrets.go
	s.volumeRoutes(mux)   // volumes.go, volumecontent.go
	s.diffRoutes(mux)     // diff.go: diff and apply
	s.nodeRoutes(mux)     // nodes.go: the node registry
	return mux
}

// health answers the liveness probe; it needs no API key.
func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// serveMetrics answers a Prometheus scrape (Config.Metrics).
func (s *Server) serveMetrics(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Metrics == nil {
		s.notFound(w, r)
		return
	}
	s.cfg.Metrics.ServeHTTP(w, r)
}

// notImplemented answers routes whose operation forkbox does not have yet.
func (s *Server) notImplemented(w http.ResponseWriter, r *http.Request) {
	writeStatus(w, http.StatusNotImplemented, r.Method+" "+r.URL.Path+" is not implemented yet")
}

// notFound answers unknown routes in the API's error shape.
func (s *Server) notFound(w http.ResponseWriter, r *http.Request) {
	writeStatus(w, http.StatusNotFound, "no route for "+r.Method+" "+r.URL.Path)
}
