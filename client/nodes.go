package client

import (
	"context"
	"net/http"
	"time"
)

// Node is a daemon of a forkbox cluster as the node registry reports it
// (GET /nodes). A single daemon on SQLite is a cluster of one.
type Node struct {
	NodeID string `json:"nodeID"`
	// URL is where the other nodes reach it (serve --advertise-url).
	URL string `json:"url"`
	// State is "alive", "draining" (takes no new sandboxes) or "dead"
	// (its lease ran out: killed, stopped or cut off).
	State    string `json:"state"`
	Draining bool   `json:"draining"`
	// Self is whether it is the node that answered.
	Self bool `json:"self"`
	// Capacity is the sandboxes it runs at most; Running those it ran at
	// its last heartbeat.
	Capacity      int     `json:"capacity"`
	Running       int     `json:"running"`
	FreeMemoryMiB int64   `json:"freeMemoryMiB"`
	CPUs          int     `json:"cpus"`
	Load1         float64 `json:"load1"`
	Version       string  `json:"version"`
	// StartedAt is when the daemon started, HeartbeatAt its last
	// heartbeat, LeaseUntil when it counts as dead without another.
	StartedAt   time.Time `json:"startedAt"`
	HeartbeatAt time.Time `json:"heartbeatAt"`
	LeaseUntil  time.Time `json:"leaseUntil"`
}

// Node states.
const (
	NodeAlive    = "alive"
	NodeDraining = "draining"
	NodeDead     = "dead"
)

// ListNodes returns every node of the cluster, dead ones too, by id.
func (c *Client) ListNodes(ctx context.Context) ([]Node, error) {
	var out []Node
	if _, err := c.do(ctx, call{method: http.MethodGet, path: "/nodes", out: &out}); err != nil {
		return nil, err
	}
	return out, nil
}

// GetNode returns the node with id; an unknown one is a 404 (IsNotFound).
func (c *Client) GetNode(ctx context.Context, id string) (*Node, error) {
	return c.nodeCall(ctx, http.MethodGet, "/nodes/"+pathID(id))
}

// DrainNode stops the node with id from taking new sandboxes (creates,
// forks and clones on it answer 503) and returns it; its sandboxes keep
// running. Any node of the cluster may be asked.
func (c *Client) DrainNode(ctx context.Context, id string) (*Node, error) {
	return c.nodeCall(ctx, http.MethodPost, "/nodes/"+pathID(id)+"/drain")
}

// UndrainNode lets the node with id take new sandboxes again.
func (c *Client) UndrainNode(ctx context.Context, id string) (*Node, error) {
	return c.nodeCall(ctx, http.MethodPost, "/nodes/"+pathID(id)+"/undrain")
}

// RemoveNode deletes a dead node from the cluster's records (a node
// retired for good; one that starts again registers anew). A node whose
// lease runs, or whose sandboxes are still recorded running, is a 409
// (IsConflict) saying why; an unknown one a 404.
func (c *Client) RemoveNode(ctx context.Context, id string) error {
	_, err := c.do(ctx, call{method: http.MethodDelete, path: "/nodes/" + pathID(id)})
	return err
}

func (c *Client) nodeCall(ctx context.Context, method, path string) (*Node, error) {
	out := &Node{}
	if _, err := c.do(ctx, call{method: method, path: path, out: out}); err != nil {
		return nil, err
	}
	return out, nil
}
