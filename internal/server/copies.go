package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/sandbox"
)

// This file spreads a clone's copies over the nodes of a cluster that
// shares its images: the node running the source takes the snapshot and
// asks the nodes placement picks to start copies from it
// (POST /cluster/copies, node to node, with the cluster's API key), and
// kills them there when a strict clone fails.

// copyBody is POST /cluster/copies: start a copy of sandbox SourceID from
// snapshot SnapshotID, with a TTL of TimeoutMs.
type copyBody struct {
	SourceID   string `json:"sourceID"`
	SnapshotID string `json:"snapshotID"`
	TimeoutMs  int64  `json:"timeoutMs"`
}

// startCopy serves POST /cluster/copies: 201 with the copy.
func (s *Server) startCopy(w http.ResponseWriter, r *http.Request) {
	var body copyBody
	if err := decodeBody(w, r, &body, false); err != nil {
		writeError(w, err)
		return
	}
	if err := s.cfg.Nodes.CheckAccepting(r.Context()); err != nil {
		writeError(w, err)
		return
	}
	sb, err := s.mgr.StartCopy(r.Context(), body.SourceID, body.SnapshotID, time.Duration(body.TimeoutMs)*time.Millisecond)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, s.toSandboxJSON(sb))
}

// copyPlacer is the server's sandbox.CopyPlacer: placement by the node
// registry, requests to the other nodes' advertised URLs.
type copyPlacer struct {
	s      *Server
	client *http.Client
}

// PlaceCopy implements sandbox.CopyPlacer.
func (p copyPlacer) PlaceCopy(ctx context.Context, want []string) (string, error) {
	pl, err := p.s.cfg.Nodes.Place(ctx, want...)
	if err != nil || pl.Self {
		return "", err
	}
	return pl.Node, nil
}

// StartCopy implements sandbox.CopyPlacer.
func (p copyPlacer) StartCopy(ctx context.Context, node, src, snap string, ttl time.Duration) (string, error) {
	body, _ := json.Marshal(copyBody{SourceID: src, SnapshotID: snap, TimeoutMs: ttl.Milliseconds()})
	var out sandboxJSON
	if err := p.call(ctx, node, http.MethodPost, "/cluster/copies", body, &out); err != nil {
		return "", err
	}
	return out.SandboxID, nil
}

// KillCopy implements sandbox.CopyPlacer.
func (p copyPlacer) KillCopy(ctx context.Context, node, id string) error {
	return p.call(ctx, node, http.MethodDelete, "/sandboxes/"+id, nil, nil)
}

// call sends one request to node and decodes its answer into out; an
// error answer keeps its class (a 404 there is ErrNotFound here).
func (p copyPlacer) call(ctx context.Context, node, method, path string, body []byte, out any) error {
	n, err := p.s.cfg.Nodes.Get(ctx, node)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, method, n.URL+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("X-API-Key", p.s.cfg.ClusterKey)
	req.Header.Set("Content-Type", "application/json")
	for range maxForwardHops { // answered there, never passed on
		req.Header.Add(forwardedHeader, p.s.cfg.NodeID)
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return fmt.Errorf("node %s: %v: %w", node, err, errdefs.ErrUnavailable)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		var e apiError
		json.NewDecoder(resp.Body).Decode(&e)
		return fmt.Errorf("node %s answered %d: %s: %w", node, resp.StatusCode, e.Message, classOfStatus(resp.StatusCode))
	}
	if out == nil {
		return nil
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// classOfStatus is the errdefs class an HTTP status stands for (httpStatus
// backwards), for answers of other nodes.
func classOfStatus(status int) error {
	for _, c := range statuses {
		if c.status == status {
			return c.class
		}
	}
	return errdefs.ErrInternal
}

var _ sandbox.CopyPlacer = copyPlacer{}
