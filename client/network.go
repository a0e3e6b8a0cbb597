package client

import (
	"context"
	"net/http"
)

// NetworkRules are a sandbox's network settings (E2B's network object),
// with E2B's meaning: DenyOut lists IPv4 addresses and CIDRs the sandbox
// may not reach; AllowOut lists exceptions to DenyOut (on its own it
// restricts nothing) as addresses, CIDRs, host names and *.wildcards (any
// depth below, not the apex). Host names are enforced on ports 80 and 443
// by the daemon's egress proxy (HTTP Host, TLS SNI). Whatever the rules,
// private and link-local addresses, the host and other sandboxes stay
// unreachable.
type NetworkRules struct {
	AllowOut []string `json:"allowOut,omitempty"`
	DenyOut  []string `json:"denyOut,omitempty"`
	// Rules set headers on the sandbox's HTTP and HTTPS requests to a
	// domain (key: a host name or *.wildcard; an exact name beats the
	// longest wildcard). They grant no access. Reported with their values
	// by GetSandbox, without them by NetworkStatus.
	Rules map[string][]NetworkRule `json:"rules,omitempty"`
	// EgressProxy tunnels the sandbox's outbound TCP through a SOCKS5
	// proxy after filtering; its password is never reported back.
	EgressProxy *EgressProxy `json:"egressProxy,omitempty"`
	// AllowPublicTraffic false makes the sandbox's ports (other than the
	// agent's) require the traffic access token. Set at create only.
	AllowPublicTraffic *bool `json:"allowPublicTraffic,omitempty"`
	// MaskRequestHost replaces the Host of requests the data plane
	// forwards to the sandbox (${PORT}: the port). Set at create only.
	MaskRequestHost string `json:"maskRequestHost,omitempty"`
	// HTTPSPorts are ports the data plane reaches over TLS, without
	// verifying their certificate. Set at create only.
	HTTPSPorts []int `json:"httpsPorts,omitempty"`
}

// NetworkRule is one rule of a domain: a transform of its requests.
type NetworkRule struct {
	Transform *NetworkTransform `json:"transform,omitempty"`
}

// NetworkTransform sets headers, replacing any of the same name.
type NetworkTransform struct {
	Headers map[string]string `json:"headers,omitempty"`
}

// EgressProxy is a SOCKS5 proxy (RFC 1928, with RFC 1929 credentials).
type EgressProxy struct {
	// Address is host:port; a host name must resolve to a public address.
	Address  string `json:"address"`
	Username string `json:"username,omitempty"`
	Password string `json:"password,omitempty"`
}

// NetworkUpdate is the whole egress policy UpdateNetwork puts in force; a
// nil or empty field is cleared.
type NetworkUpdate struct {
	// AllowInternet false denies 0.0.0.0/0 (AllowOut still applies); nil
	// means true.
	AllowInternet *bool
	AllowOut      []string
	DenyOut       []string
	Rules         map[string][]NetworkRule
	EgressProxy   *EgressProxy
}

type networkUpdateRequest struct {
	AllowInternet *bool                    `json:"allow_internet_access,omitempty"`
	AllowOut      []string                 `json:"allowOut,omitempty"`
	DenyOut       []string                 `json:"denyOut,omitempty"`
	Rules         map[string][]NetworkRule `json:"rules,omitempty"`
	EgressProxy   *EgressProxy             `json:"egressProxy,omitempty"`
}

// UpdateNetwork replaces the egress rules of a running or paused sandbox
// (PUT /sandboxes/{id}/network). Established connections stay up; new ones
// follow the new rules. A bad rule set is ErrBadRequest and changes nothing.
func (c *Client) UpdateNetwork(ctx context.Context, id string, u NetworkUpdate) error {
	req := networkUpdateRequest{AllowInternet: u.AllowInternet, AllowOut: u.AllowOut, DenyOut: u.DenyOut,
		Rules: u.Rules, EgressProxy: u.EgressProxy}
	_, err := c.do(ctx, call{method: http.MethodPut, path: "/sandboxes/" + pathID(id) + "/network", in: req})
	return err
}
