package server

import (
	"net/http"

	"github.com/forkbox/forkbox/internal/netpolicy"
)

// EgressDenials reports what each sandbox's egress rules refused (the
// daemon's egress.Denials).
type EgressDenials interface {
	Report(id string) netpolicy.DenialReport
}

// networkStatusJSON is GET /sandboxes/{id}/network (a forkbox extension;
// E2B has only the PUT): the rules in force and what they refused. The
// rules' header values are not shown here (GET /sandboxes/{id} has them).
type networkStatusJSON struct {
	SandboxID           string                 `json:"sandboxID"`
	AllowInternetAccess bool                   `json:"allowInternetAccess"`
	Network             networkJSON            `json:"network"`
	Denials             netpolicy.DenialReport `json:"denials"`
}

// networkStatus is GET /sandboxes/{id}/network: the rules as GET
// /sandboxes/{id} reports them, plus the denial counts by reason and the
// most recent denials (destination, name, rule). Counts start with the
// daemon.
func (s *Server) networkStatus(w http.ResponseWriter, r *http.Request) {
	sb, err := s.mgr.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	out := networkStatusJSON{SandboxID: sb.ID, AllowInternetAccess: sb.AllowInternet,
		Network: networkJSON{AllowOut: []string{}, DenyOut: []string{}}}
	if n := toNetworkJSON(sb); n != nil {
		out.Network = *n
		out.Network.Rules = redactRules(n.Rules)
	}
	if s.cfg.Egress != nil {
		out.Denials = s.cfg.Egress.Report(sb.ID)
	} else {
		out.Denials = netpolicy.DenialReport{ByReason: map[string]uint64{}, Recent: []netpolicy.Denial{}}
	}
	writeJSON(w, http.StatusOK, out)
}
