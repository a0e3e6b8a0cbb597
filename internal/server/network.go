package server

import (
	"net/http"

	"github.com/forkbox/forkbox/internal/netpolicy"
	"github.com/forkbox/forkbox/internal/sandbox"
)

// networkUpdateBody is SandboxNetworkUpdateConfig: the whole egress
// policy of a running sandbox; an omitted field is cleared.
type networkUpdateBody struct {
	AllowInternetAccess *bool    `json:"allow_internet_access"`
	AllowOut            []string `json:"allowOut"`
	DenyOut             []string `json:"denyOut"`
}

// networkJSON is the part of SandboxNetworkConfig GET /sandboxes/{id}
// reports: the rules in force.
type networkJSON struct {
	AllowOut []string `json:"allowOut,omitempty"`
	DenyOut  []string `json:"denyOut,omitempty"`
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
		Rules:         rulesOf(body.AllowOut, body.DenyOut),
		AllowInternet: body.AllowInternetAccess,
	}
	if _, err := s.mgr.SetNetwork(r.Context(), r.PathValue("id"), req); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// rulesOf is nil when both lists are empty.
func rulesOf(allowOut, denyOut []string) *netpolicy.Rules {
	if len(allowOut) == 0 && len(denyOut) == 0 {
		return nil
	}
	return &netpolicy.Rules{AllowOut: allowOut, DenyOut: denyOut}
}

// networkRules are the create body's egress rules (nil: none stated).
func (b *createBody) networkRules() *netpolicy.Rules {
	if b.Network == nil {
		return nil
	}
	return rulesOf(b.Network.AllowOut, b.Network.DenyOut)
}

// toNetworkJSON reports sb's rules, nil when it has none.
func toNetworkJSON(sb *sandbox.Sandbox) *networkJSON {
	if sb.Network == nil {
		return nil
	}
	return &networkJSON{AllowOut: sb.Network.AllowOut, DenyOut: sb.Network.DenyOut}
}
