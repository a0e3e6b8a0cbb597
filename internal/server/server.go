// Package server is the daemon's HTTP edge: one listener serves the
// E2B-compatible control API (REST, authenticated by API key) and the data
// plane (a reverse proxy into sandboxes, routed by the E2b-Sandbox-Id header
// or a <port>-<sandboxID>.<domain> host name). Errors from the core carry
// internal/errdefs classes; this package alone turns them into statuses.
package server

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/h2c"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/sandbox"
	"github.com/forkbox/forkbox/internal/template/build"
	"github.com/forkbox/forkbox/web"
)

// Default ports of the services E2B clients reach inside a sandbox.
const (
	// DefaultEnvdPort is the agent's (envd's) port.
	DefaultEnvdPort = 49983
	// CodeInterpreterPort is the code interpreter's port.
	CodeInterpreterPort = 49999
)

// APIKeys knows the API keys the control API accepts (a *store.Store).
type APIKeys interface {
	HasAPIKey(ctx context.Context, key string) (bool, error)
}

// Config configures a Server. Manager and Keys are required.
type Config struct {
	// Manager owns the sandboxes the API acts on: the server's only door
	// to the domain.
	Manager *sandbox.Manager
	// Keys holds the API keys the control API accepts.
	Keys APIKeys
	// Logger receives one line per request; nil means slog.Default().
	Logger *slog.Logger
	// Domain is the base domain of sandbox host names (<port>-<id>.<Domain>).
	// Empty means none: create and connect answer domain: null, so SDKs keep
	// using the sandbox URL they were configured with.
	Domain string
	// EnvdPort is the agent's port inside sandboxes (0: DefaultEnvdPort).
	// Its /init route is never reachable through the proxy.
	EnvdPort int
	// TrafficTokenForSecure, when true, makes every secure sandbox's ports
	// other than envd and the code interpreter require the header
	// e2b-traffic-access-token. When false (E2B's behaviour) only sandboxes
	// created with network.allowPublicTraffic = false require it.
	TrafficTokenForSecure bool
	// Templates builds user templates (E2B's template build API); nil
	// answers those routes 501.
	Templates *build.Service
	// Metrics, if set, serves GET /metrics (the daemon's Prometheus
	// registry) behind the control API's key check.
	Metrics http.Handler
	// Egress, if set, reports each sandbox's egress denials at
	// GET /sandboxes/{id}/network.
	Egress EgressDenials
	// Secrets, if set, serves E2B's /secrets (secrets.go); nil answers 501.
	Secrets Secrets
	// Identity, if set, serves the OIDC issuer's discovery document and
	// keys under /.well-known/ without an API key (workload identity).
	Identity http.Handler
	// Nodes, if set, serves /nodes (nodes.go) and refuses new sandboxes
	// while this node is drained; nil answers /nodes 501.
	Nodes Nodes
	// NodeID names this node in the header of the requests it forwards
	// to the node that runs their sandbox (forward.go).
	NodeID string
	// ClusterKey is the API key this node sends to the others (the
	// cluster's one key) when it starts a clone's copies there
	// (copies.go); empty: copies start on the source's node.
	ClusterKey string
}

// Server serves the control API and the data plane on one handler.
type Server struct {
	cfg     Config
	log     *slog.Logger
	mgr     *sandbox.Manager
	keys    APIKeys
	api     http.Handler // control API: auth + mux
	dash    http.Handler // the web dashboard's static files (no key: the page asks for it)
	proxy   *dataPlane
	handler http.Handler
}

// New returns a Server for cfg.
func New(cfg Config) (*Server, error) {
	if cfg.Manager == nil || cfg.Keys == nil {
		return nil, fmt.Errorf("server needs a manager and API keys: %w", errdefs.ErrInvalidArgument)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.EnvdPort == 0 {
		cfg.EnvdPort = DefaultEnvdPort
	}
	s := &Server{cfg: cfg, log: cfg.Logger, mgr: cfg.Manager, keys: cfg.Keys}
	s.api = s.requireAPIKey(s.routes())
	s.dash = http.StripPrefix(strings.TrimSuffix(web.Path, "/"), web.Handler())
	s.proxy = newDataPlane(s)
	front := s.logRequests(s.recoverPanics(http.HandlerFunc(s.route)))
	s.handler = h2c.NewHandler(front, &http2.Server{})
	if cfg.Nodes != nil && cfg.ClusterKey != "" {
		// A copy's start may fetch the snapshot's image first.
		cfg.Manager.SetCopyPlacer(copyPlacer{s: s, client: &http.Client{Timeout: 5 * time.Minute}})
	}
	return s, nil
}

// Handler returns the daemon's whole HTTP handler: HTTP/1.1 and cleartext
// HTTP/2 (h2c), control API and data plane.
func (s *Server) Handler() http.Handler { return s.handler }

// route sends data-plane requests to the proxy and the rest to the API.
func (s *Server) route(w http.ResponseWriter, r *http.Request) {
	if t, ok, err := dataPlaneTarget(r); ok {
		if err != nil {
			writeError(w, err)
			return
		}
		if handled, release := s.forward(w, r, t.id, false); !handled {
			defer release()
			s.proxy.serve(w, r, t)
		}
		return
	}
	switch {
	case r.URL.Path == "/" || r.URL.Path == strings.TrimSuffix(web.Path, "/"):
		http.Redirect(w, r, web.Path, http.StatusFound)
	case strings.HasPrefix(r.URL.Path, web.Path):
		s.dash.ServeHTTP(w, r)
	case strings.HasPrefix(r.URL.Path, "/.well-known/") && s.cfg.Identity != nil:
		s.cfg.Identity.ServeHTTP(w, r) // public: relying parties carry no key
	default:
		if id, ok := sandboxOfPath(r.URL.Path); ok {
			handled, release := s.forward(w, r, id, true)
			if handled {
				return
			}
			defer release()
		}
		s.api.ServeHTTP(w, r)
	}
}
