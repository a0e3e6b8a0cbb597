package server

import (
	"crypto/subtle"
	"fmt"
	"net/http"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/sandbox"
)

// TrafficTokenHeader carries a sandbox's traffic access token to the data
// plane, for ports that require it (E2B's header name).
const TrafficTokenHeader = "E2b-Traffic-Access-Token"

// markPrivate records that sandbox id was created with
// network.allowPublicTraffic = false. The flag lives in memory only: the
// store has no field for it yet, so after a daemon restart such a sandbox
// falls back to the TrafficTokenForSecure policy.
func (s *Server) markPrivate(id string) { s.private.Store(id, struct{}{}) }

// forget drops what the server remembers about a killed sandbox.
func (s *Server) forget(id string) { s.private.Delete(id) }

// trafficTokenRequired reports whether sb's ports other than envd and the
// code interpreter require the traffic access token.
func (s *Server) trafficTokenRequired(sb *sandbox.Sandbox) bool {
	if !sb.Secure || sb.TrafficAccessToken == "" {
		return false
	}
	if s.cfg.TrafficTokenForSecure {
		return true
	}
	_, private := s.private.Load(sb.ID)
	return private
}

// checkTrafficToken enforces the traffic access token on a data-plane
// request for port of sb.
func (s *Server) checkTrafficToken(r *http.Request, sb *sandbox.Sandbox, port int) error {
	if port == s.cfg.EnvdPort || port == CodeInterpreterPort || !s.trafficTokenRequired(sb) {
		return nil
	}
	got := r.Header.Get(TrafficTokenHeader)
	if got == "" {
		return fmt.Errorf("sandbox %s port %d requires the %s header: %w", sb.ID, port, TrafficTokenHeader, errdefs.ErrForbidden)
	}
	if subtle.ConstantTimeCompare([]byte(got), []byte(sb.TrafficAccessToken)) != 1 {
		return fmt.Errorf("wrong traffic access token for sandbox %s: %w", sb.ID, errdefs.ErrForbidden)
	}
	return nil
}
