package client

import (
	"context"
	"net/http"
)

// NetworkRules are a sandbox's egress rules, with E2B's meaning: DenyOut
// lists IPv4 addresses and CIDRs the sandbox may not reach; AllowOut lists
// exceptions to DenyOut (on its own it restricts nothing) as addresses,
// CIDRs, host names and *.wildcards (any depth below, not the apex). Host
// names are enforced on ports 80 and 443 by the daemon's egress proxy
// (HTTP Host, TLS SNI). Whatever the rules, private and link-local
// addresses, the host and other sandboxes stay unreachable.
type NetworkRules struct {
	AllowOut []string `json:"allowOut,omitempty"`
	DenyOut  []string `json:"denyOut,omitempty"`
}

// NetworkUpdate is the whole egress policy UpdateNetwork puts in force; a
// nil or empty field is cleared.
type NetworkUpdate struct {
	// AllowInternet false denies 0.0.0.0/0 (AllowOut still applies); nil
	// means true.
	AllowInternet *bool
	AllowOut      []string
	DenyOut       []string
}

type networkUpdateRequest struct {
	AllowInternet *bool    `json:"allow_internet_access,omitempty"`
	AllowOut      []string `json:"allowOut,omitempty"`
	DenyOut       []string `json:"denyOut,omitempty"`
}

// UpdateNetwork replaces the egress rules of a running or paused sandbox
// (PUT /sandboxes/{id}/network). Established connections stay up; new ones
// follow the new rules. A bad rule set is ErrBadRequest and changes nothing.
func (c *Client) UpdateNetwork(ctx context.Context, id string, u NetworkUpdate) error {
	req := networkUpdateRequest{AllowInternet: u.AllowInternet, AllowOut: u.AllowOut, DenyOut: u.DenyOut}
	_, err := c.do(ctx, call{method: http.MethodPut, path: "/sandboxes/" + pathID(id) + "/network", in: req})
	return err
}
