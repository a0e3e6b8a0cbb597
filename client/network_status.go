package client

import (
	"context"
	"net/http"
	"time"
)

// Denial is one egress attempt a sandbox's rules refused.
type Denial struct {
	Time time.Time `json:"time"`
	// Layer is "kernel" (a dropped packet) or "proxy" (a connection on
	// port 80 or 443 the egress proxy refused).
	Layer string `json:"layer"`
	// Destination is an address (kernel) or address:port (proxy).
	Destination string `json:"destination"`
	// Name is the HTTP Host or TLS SNI asked for, if any.
	Name string `json:"name,omitempty"`
	// Reason is forbidden, denyOut, name, resolve, hostSwitch, host or placeholder (a rule's secret or token could not be filled in).
	Reason string `json:"reason"`
	// Rule names the rule that refused, in words.
	Rule string `json:"rule"`
}

// Denials are what a sandbox was refused since the daemon started:
// kernel counts are dropped packets, proxy counts refused connections.
type Denials struct {
	Total    uint64            `json:"total"`
	ByReason map[string]uint64 `json:"byReason"`
	// Recent are the latest denials, oldest first.
	Recent []Denial `json:"recent"`
}

// NetworkStatus is a sandbox's egress rules in force and what they refused.
type NetworkStatus struct {
	SandboxID           string       `json:"sandboxID"`
	AllowInternetAccess bool         `json:"allowInternetAccess"`
	Network             NetworkRules `json:"network"`
	Denials             Denials      `json:"denials"`
}

// NetworkStatus returns the egress rules of a sandbox and its denial
// counts and recent denials (GET /sandboxes/{id}/network, a forkbox
// extension).
func (c *Client) NetworkStatus(ctx context.Context, id string) (*NetworkStatus, error) {
	st := &NetworkStatus{}
	if _, err := c.do(ctx, call{method: http.MethodGet, path: "/sandboxes/" + pathID(id) + "/network", out: st}); err != nil {
		return nil, err
	}
	return st, nil
}
