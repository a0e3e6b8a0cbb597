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

// trafficTokenRequired reports whether sb's ports other than envd and the
// code interpreter require the traffic access token.
func (s *Server) trafficTokenRequired(sb *sandbox.Sandbox) bool {
	if !sb.Secure || sb.TrafficAccessToken == "" {
		return false
	}
	if s.cfg.TrafficTokenForSecure {
		return true
	}
	return sb.PrivateTraffic
}

// checkTrafficToken enforces the tokens of a data-plane request for port
// of sb: envd checks its own access token; the code interpreter's /execute
// needs it too (the SDK sends it there, not to the contexts API); every
// other port of a private sandbox needs the traffic token.
func (s *Server) checkTrafficToken(r *http.Request, sb *sandbox.Sandbox, port int) error {
	if port == CodeInterpreterPort && sb.Secure && r.URL.Path == "/execute" &&
		subtle.ConstantTimeCompare([]byte(r.Header.Get("X-Access-Token")), []byte(sb.EnvdAccessToken)) != 1 {
		return fmt.Errorf("sandbox %s: /execute needs the sandbox's X-Access-Token: %w", sb.ID, errdefs.ErrUnauthenticated)
	}
	if port == s.cfg.EnvdPort || !s.trafficTokenRequired(sb) {
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
