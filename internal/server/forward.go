package server

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"

	"github.com/forkbox/forkbox/internal/cluster"
	"github.com/forkbox/forkbox/internal/errdefs"
)

// forwardedHeader marks a request that one node forwarded to another,
// one value per hop. A request is forwarded at most maxForwardHops times:
// two nodes that disagree on an owner for an instant cannot bounce it
// between them, and one that reached a node just after the sandbox moved
// from it (a drain's hand-over) goes on to the new owner.
const forwardedHeader = "Forkbox-Forwarded-By"

// maxForwardHops bounds how often one request is forwarded.
const maxForwardHops = 2

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
// any port. When this node answers, release ends the sandbox's hold (Hold)
// after the handler: a drain cannot move it away in between. control
// says r is a control-API request (a resume of it may go elsewhere).
func (s *Server) forward(w http.ResponseWriter, r *http.Request, id string, control bool) (handled bool, release func()) {
	release = s.mgr.Hold(id)
	if len(r.Header.Values(forwardedHeader)) >= maxForwardHops {
		// Answered here whatever happens; a sandbox just handed or taken
		// over may not be loaded yet.
		if err := s.mgr.LoadOwned(r.Context(), id); err != nil {
			release()
			writeError(w, err)
			return true, nil
		}
		return false, release
	}
	owner, err := s.mgr.OwnerURL(r.Context(), id)
	if err != nil || owner != "" {
		release()
	}
	switch {
	case err != nil:
		writeError(w, err)
		return true, nil
	case owner == "":
		return s.resumeElsewhere(w, r, id, control, release)
	}
	s.proxyTo(w, r, owner, "sandbox "+id)
	return true, nil
}

// resumeElsewhere forwards a request that resumes paused sandbox id, held
// here by release, to the node placement picks when this node is full,
// handing the sandbox over first (Manager.MoveIfFull); otherwise this
// node answers. It is forward's tail for a sandbox this node has.
func (s *Server) resumeElsewhere(w http.ResponseWriter, r *http.Request, id string, control bool, release func()) (bool, func()) {
	if s.cfg.Nodes == nil || !s.resumes(r, id, control) {
		return false, release
	}
	var to cluster.Placement
	node, err := s.mgr.MoveIfFull(r.Context(), id, func(ctx context.Context, want []string) (string, error) {
		p, err := s.cfg.Nodes.Place(ctx, want...)
		to = p
		return p.Node, err
	})
	switch {
	case err != nil:
		release()
		writeError(w, err)
		return true, nil
	case node == "":
		return false, release
	}
	release()
	s.proxyTo(w, r, to.URL, "sandbox "+id)
	return true, nil
}

// resumes reports whether r resumes paused sandbox id: a control-API
// connect or resume, or data-plane traffic for a sandbox that wakes on
// it (auto-resume).
func (s *Server) resumes(r *http.Request, id string, control bool) bool {
	if control {
		return isResume(r)
	}
	sb, err := s.mgr.Get(r.Context(), id)
	return err == nil && wakesOnTraffic(sb)
}

// isResume reports whether r asks to resume a sandbox (connect, resume).
func isResume(r *http.Request) bool {
	if r.Method != http.MethodPost {
		return false
	}
	p := strings.TrimPrefix(r.URL.Path, "/v2")
	return strings.HasSuffix(p, "/connect") || (!strings.HasPrefix(r.URL.Path, "/v2") && strings.HasSuffix(p, "/resume"))
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
			pr.Out.Header.Add(forwardedHeader, s.cfg.NodeID)
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
// (preferring one that caches the template's images) when that is
// another node and the template is one every node holds, and reports
// whether it answered. raw is the body, already read: r's is
// consumed.
func (s *Server) placeCreate(w http.ResponseWriter, r *http.Request, raw []byte, templateID string) bool {
	if s.cfg.Nodes == nil || r.Header.Get(forwardedHeader) != "" || !s.mgr.Placeable(r.Context(), templateID) {
		return false
	}
	p, err := s.cfg.Nodes.Place(r.Context(), s.mgr.TemplateKeys(r.Context(), templateID)...)
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

// forwardVolume sends r to the node keeping the storage of the volume it
// is about (home says which: sandbox.Manager.VolumeHome, CreateHome) when
// that is another node, and reports whether it answered; writeErr answers
// home's error in the route's shape.
func (s *Server) forwardVolume(w http.ResponseWriter, r *http.Request, what string, home func() (string, error), writeErr func(http.ResponseWriter, error)) bool {
	if len(r.Header.Values(forwardedHeader)) >= maxForwardHops {
		return false
	}
	url, err := home()
	switch {
	case err != nil:
		writeErr(w, err)
		return true
	case url == "":
		return false
	}
	s.proxyTo(w, r, url, what)
	return true
}

// forwardCreate sends a create that mounts volumes (named, or a
// snapshot's) to the node keeping them when that is another node: the
// sandbox must run where its volumes are, so this comes before placement.
// raw is the body, already read. It reports whether it answered.
func (s *Server) forwardCreate(w http.ResponseWriter, r *http.Request, raw []byte, body createBody) bool {
	var names []string
	for _, vm := range body.VolumeMounts {
		names = append(names, vm.Name)
	}
	r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(raw)), int64(len(raw))
	return s.forwardVolume(w, r, "a create mounting volumes", func() (string, error) {
		return s.mgr.CreateHome(r.Context(), body.TemplateID, names)
	}, writeError)
}
