package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// Lineage node kinds.
const (
	KindSandbox  = "sandbox"
	KindSnapshot = "snapshot"
)

// LineageNode is one sandbox or snapshot in a lineage tree. Children are the
// sandboxes and snapshots derived from it (snapshots taken, clones and forks
// started, sandboxes created from a snapshot).
type LineageNode struct {
	ID string `json:"id"`
	// Kind is KindSandbox or KindSnapshot.
	Kind     string `json:"kind"`
	ParentID string `json:"parentId,omitempty"`
	// Origin says how the node came to be: create, snapshot, clone, fork,
	// rollback, ….
	Origin    string         `json:"origin,omitempty"`
	State     string         `json:"state,omitempty"`
	CreatedAt time.Time      `json:"createdAt,omitzero"`
	Children  []*LineageNode `json:"children,omitempty"`
}

// Lineage returns the tree of forks, snapshots and rollbacks that contains
// the sandbox or snapshot id (GET /sandboxes/{id}/lineage), from its root.
func (c *Client) Lineage(ctx context.Context, id string) (*LineageNode, error) {
	var raw json.RawMessage
	if _, err := c.do(ctx, call{method: http.MethodGet, path: "/sandboxes/" + pathID(id) + "/lineage", out: &raw}); err != nil {
		return nil, err
	}
	root, err := decodeLineage(raw, id)
	if err != nil {
		return nil, fmt.Errorf("decode lineage of %s: %w", id, err)
	}
	return root, nil
}

// decodeLineage accepts the tree as a root node, as {"nodes": [...]} or as a
// bare array of nodes linked by parentId, so the SDK keeps working whichever
// shape the server settles on.
func decodeLineage(raw json.RawMessage, id string) (*LineageNode, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '{' {
		var obj struct {
			LineageNode
			Nodes []*LineageNode `json:"nodes"`
			Root  *LineageNode   `json:"root"`
		}
		if err := json.Unmarshal(raw, &obj); err != nil {
			return nil, err
		}
		switch {
		case obj.Root != nil:
			return obj.Root, nil
		case obj.Nodes != nil:
			return buildTree(obj.Nodes, id)
		}
		n := obj.LineageNode
		return &n, nil
	}
	var nodes []*LineageNode
	if err := json.Unmarshal(raw, &nodes); err != nil {
		return nil, err
	}
	return buildTree(nodes, id)
}

// buildTree links a flat node list by parentId and returns the root whose
// subtree contains id (or the first root).
func buildTree(nodes []*LineageNode, id string) (*LineageNode, error) {
	byID := make(map[string]*LineageNode, len(nodes))
	for _, n := range nodes {
		byID[n.ID] = n
	}
	var roots []*LineageNode
	for _, n := range nodes {
		if p, ok := byID[n.ParentID]; ok && n.ParentID != "" && p != n {
			p.Children = append(p.Children, n)
			continue
		}
		roots = append(roots, n)
	}
	if len(roots) == 0 {
		return nil, fmt.Errorf("no root node in %d nodes", len(nodes))
	}
	for _, r := range roots {
		if r.Find(id) != nil {
			return r, nil
		}
	}
	return roots[0], nil
}

// Find returns the node with the given id in the subtree rooted at n, or nil.
func (n *LineageNode) Find(id string) *LineageNode {
	if n == nil {
		return nil
	}
	if n.ID == id {
		return n
	}
	for _, ch := range n.Children {
		if f := ch.Find(id); f != nil {
			return f
		}
	}
	return nil
}
