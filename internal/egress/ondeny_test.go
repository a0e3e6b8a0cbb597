package egress

import (
	"fmt"
	"net"
	"testing"

	"github.com/forkbox/forkbox/internal/netpolicy"
)

// TestProxyReportsDenials: every refused connection reaches OnDeny with
// its destination, the name asked for, the reason and the rule; allowed
// ones do not.
func TestProxyReportsDenials(t *testing.T) {
	res := startDNS(t)
	good := startServer(t, "A", goodIP+":0", nil)
	port := good.ln.Addr().(*net.TCPAddr).Port
	h := newHarness(t, policy(t, netpolicy.Rules{
		AllowOut: []string{"allowed.test", "private.test"},
		DenyOut:  []string{"0.0.0.0/0"},
	}), res)
	dst := fmt.Sprintf("%s:%d", goodIP, port)
	tests := []struct {
		host, reason, rule string
	}{
		{"allowed.test", "", ""},
		{"other.test", netpolicy.ReasonName, "name other.test not in allowOut and 127.0.0.2 denied"},
		{"private.test", netpolicy.ReasonResolve, "private.test resolves only to forbidden addresses [10.1.2.3]"},
		{goodIP, netpolicy.ReasonDenyOut, "address 127.0.0.2 denied: denyOut 0.0.0.0/0"},
	}
	for _, tt := range tests {
		h.mu.Lock()
		h.denials = nil
		h.mu.Unlock()
		h.get(dst, tt.host)
		h.mu.Lock()
		got := h.denials
		h.mu.Unlock()
		if tt.reason == "" {
			if len(got) != 0 {
				t.Errorf("%s: allowed but reported %+v", tt.host, got)
			}
			continue
		}
		if len(got) != 1 || got[0].Reason != tt.reason || got[0].Rule != tt.rule || got[0].Destination != dst ||
			got[0].Layer != netpolicy.LayerProxy || got[0].Name != tt.host || got[0].Time.IsZero() {
			t.Errorf("%s: reported %+v, want reason %s rule %q to %s", tt.host, got, tt.reason, tt.rule, dst)
		}
	}
}
