// Package clienttest provides an in-memory fake of the forkbox daemon — the
// control API and a fake agent behind the data-plane route — for testing code
// that uses package client (the SDK's own tests and the CLI's).
//
// The fake is strict where real clients could go wrong: it requires the API
// key, rejects unknown JSON fields, and routes the data plane only for known
// sandboxes, port 49983 and the right access token.
package clienttest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/forkbox/forkbox/client"
)

// APIKey is the key the fake accepts.
const APIKey = "e2b_0123456789abcdef"

// Request is a recorded control-API request.
type Request struct {
	Method string
	Path   string
	Query  string
	Header http.Header
	Body   []byte
}

// Server is a fake forkbox daemon. Its exported methods are safe for
// concurrent use.
type Server struct {
	// URL is the base URL of the control API and the data plane.
	URL string

	mu        sync.Mutex
	seq       int
	order     []string                // sandbox ids in creation order
	sandboxes map[string]*Sandbox     // by id, killed ones removed
	snapshots []*snapshot             // in creation order
	nodes     []*client.LineageNode   // every sandbox and snapshot ever made
	requests  []Request               // control-API requests
	procs     map[uint32]*fakeProcess // running fake processes by pid
	pid       uint32
}

// Sandbox is the fake's record of one sandbox.
type Sandbox struct {
	Info      client.SandboxInfo
	Token     string // envd access token; required on the data plane when Secure
	Secure    bool
	AutoPause bool
	EnvVars   map[string]string
	Files     map[string][]byte // absolute path → content; directories end in "/"
}

type snapshot struct {
	info  client.SnapshotInfo
	files map[string][]byte
}

// NewServer starts a fake daemon, closed when the test ends.
func NewServer(t testing.TB) *Server {
	s := &Server{sandboxes: map[string]*Sandbox{}, procs: map[uint32]*fakeProcess{}}
	hs := httptest.NewServer(s.handler())
	t.Cleanup(hs.Close)
	s.URL = hs.URL
	return s
}

// Requests returns the control-API requests received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// LastRequest returns the latest control-API request.
func (s *Server) LastRequest() Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.requests) == 0 {
		return Request{}
	}
	return s.requests[len(s.requests)-1]
}

// Sandbox returns a copy of the fake's record of a sandbox, or nil.
func (s *Server) Sandbox(id string) *Sandbox {
	s.mu.Lock()
	defer s.mu.Unlock()
	sb, ok := s.sandboxes[id]
	if !ok {
		return nil
	}
	cp := *sb
	cp.Files = copyFiles(sb.Files)
	return &cp
}

// AddSandbox registers a sandbox directly (running unless info.State says
// otherwise; zero fields get defaults) and returns its id.
func (s *Server) AddSandbox(info client.SandboxInfo) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if info.SandboxID == "" {
		info.SandboxID = s.newIDLocked("sbx")
	}
	if info.State == "" {
		info.State = "running"
	}
	if info.TemplateID == "" {
		info.TemplateID = "base"
	}
	if info.StartedAt.IsZero() {
		info.StartedAt, info.EndAt = now(), now().Add(5*time.Minute)
	}
	info.CPUCount, info.MemoryMB = max(info.CPUCount, 2), max(info.MemoryMB, 512)
	info.EnvdVersion = EnvdVersion
	s.addLocked(&Sandbox{Info: info, Files: map[string][]byte{}}, "", "create")
	return info.SandboxID
}

func (s *Server) newIDLocked(prefix string) string {
	s.seq++
	return fmt.Sprintf("%s%04d", prefix, s.seq)
}

func (s *Server) addLocked(sb *Sandbox, parent, origin string) {
	s.sandboxes[sb.Info.SandboxID] = sb
	s.order = append(s.order, sb.Info.SandboxID)
	s.nodes = append(s.nodes, &client.LineageNode{
		ID: sb.Info.SandboxID, Kind: client.KindSandbox, ParentID: parent,
		Origin: origin, State: sb.Info.State, CreatedAt: sb.Info.StartedAt,
	})
}

func (s *Server) handler() http.Handler {
	api := http.NewServeMux()
	s.routes(api)
	data := s.dataPlane()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The daemon tells the two planes apart by the routing header.
		if r.Header.Get("E2b-Sandbox-Id") != "" {
			data.ServeHTTP(w, r)
			return
		}
		if r.Header.Get("X-API-Key") != APIKey {
			writeError(w, http.StatusUnauthorized, "invalid API key")
			return
		}
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		s.mu.Lock()
		s.requests = append(s.requests, Request{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Clone(), body})
		s.mu.Unlock()
		api.ServeHTTP(w, r)
	})
}

func (s *Server) routes(mux *http.ServeMux) {
	mux.HandleFunc("POST /sandboxes", s.create)
	mux.HandleFunc("GET /sandboxes/{id}", s.get)
	mux.HandleFunc("GET /v2/sandboxes", s.list)
	mux.HandleFunc("DELETE /sandboxes/{id}", s.kill)
	mux.HandleFunc("POST /sandboxes/{id}/timeout", s.timeout)
	mux.HandleFunc("POST /sandboxes/{id}/refreshes", s.refresh)
	mux.HandleFunc("POST /sandboxes/{id}/connect", s.connect)
	mux.HandleFunc("POST /sandboxes/{id}/pause", s.pause)
	mux.HandleFunc("GET /sandboxes/{id}/metrics", s.metrics)
	mux.HandleFunc("POST /sandboxes/{id}/snapshots", s.snapshot)
	mux.HandleFunc("GET /snapshots", s.listSnapshots)
	mux.HandleFunc("DELETE /templates/{id}", s.deleteSnapshot)
	mux.HandleFunc("POST /sandboxes/{id}/fork", s.fork)
	mux.HandleFunc("POST /sandboxes/{id}/clone", s.clone)
	mux.HandleFunc("POST /sandboxes/{id}/rollback", s.rollback)
	mux.HandleFunc("GET /sandboxes/{id}/lineage", s.lineage)
}

// decode reads a JSON body strictly, so a client sending a misspelt field
// fails the test instead of being silently ignored.
func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		writeError(w, http.StatusBadRequest, "invalid body: "+err.Error())
		return false
	}
	return true
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]any{"code": status, "message": msg})
}

// lookupLocked finds a sandbox or answers 404.
func (s *Server) lookupLocked(w http.ResponseWriter, id string) *Sandbox {
	sb, ok := s.sandboxes[id]
	if !ok {
		writeError(w, http.StatusNotFound, fmt.Sprintf("sandbox %q not found", id))
	}
	return sb
}

func copyFiles(m map[string][]byte) map[string][]byte {
	out := make(map[string][]byte, len(m))
	for k, v := range m {
		out[k] = bytes.Clone(v)
	}
	return out
}

func now() time.Time { return time.Now().UTC().Truncate(time.Second) }

func splitCSV(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}
