package daemon

import (
	"net"
	"testing"
)

// TestIssuerHost: the default issuer is the listen address, the host's
// name for an unspecified one.
func TestIssuerHost(t *testing.T) {
	if got := issuerHost(&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 3000}); got != "127.0.0.1:3000" {
		t.Errorf("loopback: %q", got)
	}
	if got := issuerHost(&net.TCPAddr{IP: net.IPv4zero, Port: 3000}); got != net.JoinHostPort(hostname(), "3000") {
		t.Errorf("0.0.0.0: %q", got)
	}
}
