// Package clienttest runs a forkbox daemon in-process for testing code that
// uses package client (the SDK's own tests and the CLI's).
//
// The daemon is the real one — internal/server's handler over a real
// sandbox.Manager and a real store (SQLite in memory) — with the in-memory
// runtime internal/runtime/fake in place of gVisor, so the control API, its
// errors, paging, lineage and the data-plane proxy cannot drift from what
// forkbox serves. Only what runs inside a sandbox is faked: a small envd
// (see agent.go) whose commands are a few builtins and whose files live in
// memory, carried over by snapshots, clones, forks and rollbacks.
package clienttest

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/forkbox/forkbox/client"
	"github.com/forkbox/forkbox/internal/egress"
	"github.com/forkbox/forkbox/internal/images"
	"github.com/forkbox/forkbox/internal/netpolicy"
	"github.com/forkbox/forkbox/internal/runtime/fake"
	"github.com/forkbox/forkbox/internal/sandbox"
	"github.com/forkbox/forkbox/internal/secrets"
	"github.com/forkbox/forkbox/internal/server"
	"github.com/forkbox/forkbox/internal/store"
	"github.com/forkbox/forkbox/internal/volumes"
)

// APIKey is the key the daemon accepts.
const APIKey = "e2b_0123456789abcdef"

// Template is the template every daemon has (alias "base-alias").
const Template = "base"

// Request is a recorded control-API request.
type Request struct {
	Method string
	Path   string
	Query  string
	Header http.Header
	Body   []byte
}

// Server is an in-process forkbox daemon. Its exported methods are safe for
// concurrent use.
type Server struct {
	// URL is the base URL of the control API and the data plane.
	URL string
	// Denials are the sandboxes' egress denials the daemon reports; a
	// test records some with Denials.Proxy.
	Denials *egress.Denials

	t   testing.TB
	mgr *sandbox.Manager
	rt  *fake.Runtime
	st  *store.Store

	mu       sync.Mutex
	requests []Request // control-API requests, guarded by mu
}

// NewServer starts a daemon, stopped when the test ends.
func NewServer(t testing.TB) *Server {
	t.Helper()
	ctx := context.Background()
	st := newStore(t)
	s := &Server{t: t, rt: fake.New(), st: st, Denials: egress.NewDenials()}
	s.rt.Handler = func(string) http.Handler { return newAgent() }
	t.Cleanup(s.deleteAll)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	imageDir := t.TempDir()
	content, err := images.OpenContent(imageDir)
	if err != nil {
		t.Fatal(err)
	}
	vault, err := secrets.New(st, make([]byte, 32), log, nil)
	if err != nil {
		t.Fatal(err)
	}
	vols, err := volumes.New(t.TempDir(), log)
	if err != nil {
		t.Fatal(err)
	}
	// Before the TempDir goes: a mounted volume would keep it.
	t.Cleanup(func() { removeVolumes(st, vols) })
	s.mgr, err = sandbox.New(sandbox.Config{
		Runtime: s.rt, Store: st, Logger: log, AgentWait: 5 * time.Second, ImageDir: imageDir, Content: content,
		CheckNetwork: func(ctx context.Context, r netpolicy.Rules) error {
			names, _, err := r.Refs()
			if err != nil {
				return err
			}
			return vault.Exists(ctx, names) // as the daemon checks
		},
		Volumes: vols, VolumeSizeMB: 8,
	})
	if err != nil {
		t.Fatal(err)
	}
	builds, err := newBuilds(t, st, s.rt, content, log)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := content.Collect(ctx); err != nil { // as the daemon does once all hold
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{Manager: s.mgr, Keys: st, Logger: log, Templates: builds, Egress: s.Denials, Secrets: vault,
		Nodes: newNodes(t, st)})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s.record(srv.Handler()))
	t.Cleanup(hs.Close)
	s.URL = hs.URL
	return s
}

// newStore opens an in-memory store holding the test template and APIKey.
func newStore(t testing.TB) *store.Store {
	ctx := context.Background()
	st, err := store.OpenPath(ctx, ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.PutTemplate(ctx, &store.Template{
		ID: Template, Kind: store.KindTemplate, Aliases: []string{Template + "-alias"},
		CPUCount: 2, MemoryMB: 512, DiskSizeMB: 4096, RootFS: t.TempDir(),
	}); err != nil {
		t.Fatal(err)
	}
	if err := st.AddAPIKey(ctx, "test", APIKey, time.Now()); err != nil {
		t.Fatal(err)
	}
	return st
}

// deleteAll removes every fake sandbox, ending the servers inside them.
func (s *Server) deleteAll() {
	infos, _ := s.rt.List(context.Background())
	for _, in := range infos {
		s.rt.Delete(context.Background(), in.ID)
	}
}

// record keeps a copy of every control-API request (the data plane, told
// apart by its routing header as the daemon does, is not recorded).
func (s *Server) record(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("E2b-Sandbox-Id") != "" {
			next.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		s.mu.Lock()
		s.requests = append(s.requests, Request{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Clone(), body})
		s.mu.Unlock()
		next.ServeHTTP(w, r)
	})
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

// Sandbox returns what the daemon knows of a sandbox, or nil when it knows
// no sandbox of that id (never created, or killed).
func (s *Server) Sandbox(id string) *client.SandboxInfo {
	sb, err := s.mgr.Get(context.Background(), id)
	if err != nil {
		return nil
	}
	return &client.SandboxInfo{
		SandboxID: sb.ID, TemplateID: sb.TemplateID, State: string(sb.State.Public()),
		Metadata: sb.Metadata, StartedAt: sb.StartedAt, EndAt: sb.EndAt,
	}
}

// AddSandbox creates a sandbox through the daemon's manager, without a
// recorded request, and returns the id the daemon chose. It honours
// info.TemplateID (default Template), info.Metadata and info.State
// "paused"; other fields are the daemon's to set.
func (s *Server) AddSandbox(info client.SandboxInfo) string {
	ctx := context.Background()
	if info.TemplateID == "" {
		info.TemplateID = Template
	}
	sb, err := s.mgr.Create(ctx, sandbox.CreateRequest{TemplateID: info.TemplateID, Metadata: info.Metadata})
	if err != nil {
		s.t.Fatalf("clienttest: AddSandbox: %v", err)
	}
	if info.State == string(sandbox.PublicPaused) {
		if err := s.mgr.Pause(ctx, sb.ID); err != nil {
			s.t.Fatalf("clienttest: AddSandbox: pause: %v", err)
		}
	}
	return sb.ID
}

// removeVolumes unmounts and removes every volume a test left.
func removeVolumes(st *store.Store, vols *volumes.Host) {
	ctx := context.Background()
	vs, _ := st.ListVolumes(ctx)
	for _, v := range vs {
		vols.Remove(ctx, v.ID)
	}
}
