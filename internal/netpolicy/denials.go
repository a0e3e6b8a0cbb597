package netpolicy

import (
	"net/netip"
	"time"
)

// Reasons a connection attempt was refused: the label of the denial
// metrics and the reason of a denial event.
const (
	// ReasonForbidden: a range no rule opens (private, link-local and
	// metadata, loopback, reserved) unless the operator opened it.
	ReasonForbidden = "forbidden"
	// ReasonDenyOut: an address denyOut (or allow_internet_access false)
	// covers and no allowOut entry excepts.
	ReasonDenyOut = "denyOut"
	// ReasonName: a host name (Host or SNI) allowOut does not list, sent
	// to an address the address rules deny.
	ReasonName = "name"
	// ReasonResolve: an allowed name that resolved only to forbidden
	// addresses, or did not resolve.
	ReasonResolve = "resolve"
	// ReasonHostSwitch: a second host asked for on one HTTP connection.
	ReasonHostSwitch = "hostSwitch"
	// ReasonHost: the host's own addresses.
	ReasonHost = "host"
	// ReasonPlaceholder: a rule's header names a secret or token the
	// proxy could not fill in (deleted since); the request is not sent.
	ReasonPlaceholder = "placeholder"
)

// Layers that refuse: the kernel's per-sandbox rules and the egress proxy.
const (
	LayerKernel = "kernel"
	LayerProxy  = "proxy"
)

// Denial is one refused egress attempt as the API reports it.
type Denial struct {
	Time time.Time `json:"time"`
	// Layer is "kernel" (a dropped packet) or "proxy" (a refused
	// connection on port 80 or 443).
	Layer string `json:"layer"`
	// Destination is the address (kernel) or address:port (proxy) the
	// sandbox tried to reach.
	Destination string `json:"destination"`
	// Name is the HTTP Host or TLS SNI the sandbox asked for, if any.
	Name   string `json:"name,omitempty"`
	Reason string `json:"reason"`
	// Rule says which rule refused, in words.
	Rule string `json:"rule"`
}

// DenialReport is what a sandbox has been refused since the daemon
// started: totals by reason and the most recent denials, newest last.
// Kernel counts are dropped packets (a retried SYN counts again); proxy
// counts are refused connections.
type DenialReport struct {
	Total    uint64            `json:"total"`
	ByReason map[string]uint64 `json:"byReason"`
	Recent   []Denial          `json:"recent"`
}

// SampleTTL is how long the kernel keeps a refused destination as a
// sample: a destination refused again within it is the same sample.
const SampleTTL = 30 * time.Second

// KernelCount is what the kernel rules of one sandbox refused: the packet
// total of one reason and the destinations refused lately (each kept by
// the kernel for a while, so one appears once per refusal burst).
type KernelCount struct {
	ID      string
	Reason  string
	Packets uint64
	Recent  []Denial
}

// DenyRule names the rule that refuses a: the forbidden range or the
// denyOut range covering it ("" if none does).
func (p Policy) DenyRule(a netip.Addr, opened []netip.Prefix) (reason, rule string) {
	a = a.Unmap()
	if IsForbidden(a, opened) {
		for _, f := range Forbidden {
			if f.Contains(a) {
				return ReasonForbidden, "forbidden range " + f.String()
			}
		}
	}
	for _, d := range p.Deny {
		if d.Contains(a) {
			return ReasonDenyOut, "denyOut " + d.String()
		}
	}
	return "", ""
}
