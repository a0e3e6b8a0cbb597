package server

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"

	"github.com/forkbox/forkbox/internal/cluster"
)

// This file routes user templates' requests in a cluster. A template's
// build record lives on one node, its home (build.Service.Home): the one
// holding its uploaded files and running its builds. Any node accepts a
// template request and forwards it home; a new template's first build
// goes to the node placement picks; a template whose home died is taken
// over by the node asked (build.Service.Adopt).

// templateRef returns the template a template route is about: the path's
// {id} (or alias), or the name in the body of the routes that carry it
// there. r's body is put back for the handler.
func templateRef(w http.ResponseWriter, r *http.Request) (ref string, create bool) {
	switch {
	case r.PathValue("id") == "aliases":
		return r.PathValue("sub"), false
	case r.PathValue("id") != "":
		return r.PathValue("id"), false
	}
	data, err := readBody(w, r)
	r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(data)), int64(len(data))
	var body struct{ Name, Alias, Target string }
	if err != nil || json.Unmarshal(data, &body) != nil {
		return "", false // the handler answers the bad body
	}
	create = r.URL.Path == "/v3/templates"
	for _, ref := range []string{body.Name, body.Alias, body.Target} {
		if ref != "" {
			return ref, create
		}
	}
	return "", create
}

// forwardTemplate sends r to the home node of the template it is about
// when that is another live node, and reports whether it answered.
func (s *Server) forwardTemplate(w http.ResponseWriter, r *http.Request) bool {
	if s.cfg.Nodes == nil || s.cfg.Templates == nil || !s.cfg.Templates.Clustered() ||
		len(r.Header.Values(forwardedHeader)) >= maxForwardHops {
		return false
	}
	ref, create := templateRef(w, r)
	if ref == "" {
		return false
	}
	ctx := r.Context()
	home, err := s.cfg.Templates.Home(ctx, ref)
	if err != nil {
		writeError(w, err)
		return true
	}
	if home == "" {
		return create && s.placeBuild(w, r, ref)
	}
	n, err := s.cfg.Nodes.Get(ctx, home)
	if err == nil && n.State != cluster.StateDead {
		s.proxyTo(w, r, n.URL, "template "+ref)
		return true
	}
	// Its home is gone: this node takes the record over and answers.
	if err := s.cfg.Templates.Adopt(ctx, ref, home); err != nil {
		writeError(w, err)
		return true
	}
	return false
}

// placeBuild sends the first build request of new template ref to the
// node placement picks, when that is another, and reports whether it did.
func (s *Server) placeBuild(w http.ResponseWriter, r *http.Request, ref string) bool {
	if r.Header.Get(forwardedHeader) != "" {
		return false // placed by the node that sent it
	}
	name, _, _ := strings.Cut(ref, ":")
	if _, err := s.cfg.Templates.Get(r.Context(), name); err == nil {
		return false // this node's already
	}
	p, err := s.cfg.Nodes.Place(r.Context())
	if err != nil {
		writeError(w, err)
		return true
	}
	if p.Self {
		return false
	}
	s.proxyTo(w, r, p.URL, "the first build of template "+ref+", placed on node "+p.Node)
	return true
}
