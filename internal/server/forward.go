package server

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"

	"github.com/forkbox/forkbox/internal/errdefs"
)

// forwardedHeader marks a request that one node forwarded to another: it
// is answered where it lands and never forwarded again, so two nodes that
// disagree on an owner for an instant cannot bounce it between them.
const forwardedHeader = "Forkbox-Forwarded-By"

// sandboxOfPath returns the sandbox a control-API path is about
// (/sandboxes/{id}…, /v2/sandboxes/{id}…).
func sandboxOfPath(p string) (string, bool) {
	rest, ok := strings.CutPrefix(strings.TrimPrefix(p, "/v2"), "/sandboxes/")
	if !ok {
		return "", false
	}
	id, _, _ := strings.Cut(rest, "/")
	if id == "" || id == "metrics" { // GET /sandboxes/metrics is about many
		return "", false
	}
	return id, true
}

// forward sends r to the node that runs sandbox id when that is another
// node of the cluster, and reports whether it did (or answered an error).
// A client then needs one node's URL for everything: control API, envd,
// any port.
func (s *Server) forward(w http.ResponseWriter, r *http.Request, id string) bool {
	if r.Header.Get(forwardedHeader) != "" {
		return false
	}
	owner, err := s.mgr.OwnerURL(r.Context(), id)
	if err != nil {
		writeError(w, err)
		return true
	}
	if owner == "" {
		return false
	}
	s.proxyTo(w, r, owner, "sandbox "+id)
	return true
}

// proxyTo passes r to the node at base URL node, streaming both ways, and
// marks it forwarded; what names the request's subject in errors.
func (s *Server) proxyTo(w http.ResponseWriter, r *http.Request, node, what string) {
	target, err := url.Parse(node)
	if err != nil || target.Host == "" {
		writeError(w, fmt.Errorf("node URL %q of %s: %w", node, what, errdefs.ErrInternal))
		return
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Host = pr.In.Host // the data plane may route by <port>-<id>.<domain>
			pr.Out.Header.Set(forwardedHeader, s.cfg.NodeID)
		},
		// Streams (process output, watch events) must reach the client as
		// they come, not when a buffer fills.
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			writeError(w, fmt.Errorf("forward to node %s of %s: %v: %w", node, what, err, errdefs.ErrUnavailable))
		},
	}
	rp.ServeHTTP(w, r)
}

// placeCreate sends a create from templateID to the node placement picks
// when that is another node and the template is one every node holds, and
// reports whether it answered. raw is the body, already read: r's is
// consumed.
func (s *Server) placeCreate(w http.ResponseWriter, r *http.Request, raw []byte, templateID string) bool {
	if s.cfg.Nodes == nil || r.Header.Get(forwardedHeader) != "" || !s.mgr.Placeable(r.Context(), templateID) {
		return false
	}
	p, err := s.cfg.Nodes.Place(r.Context())
	if err != nil {
		writeError(w, err)
		return true
	}
	if p.Self {
		return false
	}
	r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(raw)), int64(len(raw))
	s.proxyTo(w, r, p.URL, "a create placed on node "+p.Node)
	return true
}
