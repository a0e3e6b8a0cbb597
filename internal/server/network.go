package server

import (
	"maps"
	"net/http"

	"github.com/forkbox/forkbox/internal/netpolicy"
	"github.com/forkbox/forkbox/internal/sandbox"
)

// egressBody is the egress part of E2B's network objects, in a create
// and in PUT /network.
type egressBody struct {
	AllowOut    []string                    `json:"allowOut"`
	DenyOut     []string                    `json:"denyOut"`
	Rules       map[string][]netpolicy.Rule `json:"rules"`
	EgressProxy *netpolicy.EgressProxy      `json:"egressProxy"`
}

// rules is nil when b states nothing.
func (b egressBody) rules() *netpolicy.Rules {
	r := netpolicy.Rules{AllowOut: b.AllowOut, DenyOut: b.DenyOut, Rules: b.Rules, EgressProxy: b.EgressProxy}
	if r.IsZero() {
		return nil
	}
	return &r
}

// networkBody is SandboxNetworkConfig, the create request's network.
type networkBody struct {
	egressBody
	AllowPublicTraffic *bool   `json:"allowPublicTraffic"`
	MaskRequestHost    *string `json:"maskRequestHost"`
	HTTPSPorts         []int   `json:"httpsPorts"`
}

// networkUpdateBody is SandboxNetworkUpdateConfig: the whole egress
// policy of a running sandbox; an omitted field is cleared.
type networkUpdateBody struct {
	egressBody
	AllowInternetAccess *bool `json:"allow_internet_access"`
}

// networkJSON is SandboxNetworkConfig as GET /sandboxes/{id} reports it:
// the rules in force, the egress proxy without its password, and the data
// plane's settings.
type networkJSON struct {
	AllowOut           []string                    `json:"allowOut,omitempty"`
	DenyOut            []string                    `json:"denyOut,omitempty"`
	Rules              map[string][]netpolicy.Rule `json:"rules,omitempty"`
	EgressProxy        *netpolicy.EgressProxy      `json:"egressProxy,omitempty"`
	AllowPublicTraffic *bool                       `json:"allowPublicTraffic,omitempty"`
	MaskRequestHost    string                      `json:"maskRequestHost,omitempty"`
	HTTPSPorts         []int                       `json:"httpsPorts,omitempty"`
}

// updateNetwork is PUT /sandboxes/{id}/network (sandbox.updateNetwork):
// the rules are validated whole (400 names the first bad entry or the
// limit) and replace the old ones in one step; established connections
// stay up. 204.
func (s *Server) updateNetwork(w http.ResponseWriter, r *http.Request) {
	var body networkUpdateBody
	if err := decodeBody(w, r, &body, false); err != nil {
		writeError(w, err)
		return
	}
	req := sandbox.NetworkRequest{
		Rules:         body.rules(),
		AllowInternet: body.AllowInternetAccess,
	}
	if _, err := s.mgr.SetNetwork(r.Context(), r.PathValue("id"), req); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// networkRules are the create body's egress rules (nil: none stated).
func (b *createBody) networkRules() *netpolicy.Rules {
	if b.Network == nil {
		return nil
	}
	return b.Network.rules()
}

// inbound is the create body's data-plane settings; nil when it states
// none of allowPublicTraffic, maskRequestHost and httpsPorts (a create
// from a snapshot then inherits them).
func (b *createBody) inbound() *netpolicy.Inbound {
	n := b.Network
	if n == nil || (n.AllowPublicTraffic == nil && n.MaskRequestHost == nil && n.HTTPSPorts == nil) {
		return nil
	}
	in := &netpolicy.Inbound{HTTPSPorts: n.HTTPSPorts}
	if n.MaskRequestHost != nil {
		in.MaskRequestHost = *n.MaskRequestHost
	}
	return in
}

// toNetworkJSON reports sb's network settings, nil when it has none.
func toNetworkJSON(sb *sandbox.Sandbox) *networkJSON {
	if sb.Network == nil && sb.Inbound.IsZero() && !sb.PrivateTraffic {
		return nil
	}
	public := !sb.PrivateTraffic
	out := &networkJSON{AllowPublicTraffic: &public,
		MaskRequestHost: sb.Inbound.MaskRequestHost, HTTPSPorts: sb.Inbound.HTTPSPorts}
	if n := sb.Network; n != nil {
		out.AllowOut, out.DenyOut, out.Rules, out.EgressProxy = n.AllowOut, n.DenyOut, n.Rules, n.EgressProxy.Redacted()
	}
	return out
}

// redactedValue stands for a rule's header value where the value is not
// shown (the network status, which the dashboard polls).
const redactedValue = "[redacted]"

// redactRules returns rules with every header value replaced.
func redactRules(rules map[string][]netpolicy.Rule) map[string][]netpolicy.Rule {
	if rules == nil {
		return nil
	}
	out := make(map[string][]netpolicy.Rule, len(rules))
	for key, rs := range rules {
		red := make([]netpolicy.Rule, len(rs))
		for i, r := range rs {
			if r.Transform == nil {
				continue
			}
			hs := maps.Clone(r.Transform.Headers)
			for name := range hs {
				hs[name] = redactedValue
			}
			red[i] = netpolicy.Rule{Transform: &netpolicy.Transform{Headers: hs}}
		}
		out[key] = red
	}
	return out
}
