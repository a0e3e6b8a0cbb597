package egress

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/netpolicy"
)

// fakeVault fills ${e2b.secrets.NAME} from a map the test changes.
type fakeVault struct {
	mu   sync.Mutex
	vals map[string]string
	srcs []netip.Addr
}

func (f *fakeVault) Expand(_ context.Context, src netip.Addr, v string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.srcs = append(f.srcs, src)
	return netpolicy.Expand(v, func(r netpolicy.Ref) (string, error) {
		val, ok := f.vals[r.Name]
		if !ok || r.Kind != netpolicy.KindSecret {
			return "", fmt.Errorf("secret %q does not exist: %w", r.Name, errdefs.ErrNotFound)
		}
		return val, nil
	})
}

func (f *fakeVault) set(name, v string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if v == "" {
		delete(f.vals, name)
	} else {
		f.vals[name] = v
	}
}

func placeholderRules() netpolicy.Rules {
	return netpolicy.Rules{
		AllowOut: []string{"allowed.test"},
		DenyOut:  []string{"0.0.0.0/0"},
		Rules: map[string][]netpolicy.Rule{
			"allowed.test": {{Transform: &netpolicy.Transform{Headers: map[string]string{"Authorization": "Bearer ${e2b.secrets.api-key}", "X-Plain": "as-is"}}}},
		},
	}
}

// Placeholders are filled in per request, for plain HTTP and intercepted
// HTTPS: an update shows on the next request of the same connection; a
// deleted secret refuses the request with a 502 naming it, reported as a
// denial, and nothing reaches the server.
func TestPlaceholders(t *testing.T) {
	w := newTLSWorld(t)
	plain := startRecorder(t, "P", goodIP+":0", nil)
	fv := &fakeVault{vals: map[string]string{"api-key": "v1"}}
	h := newHarnessWith(t, policy(t, placeholderRules()), w.res, func(c *Config) {
		c.CA, c.RootCAs, c.Placeholders = w.ca, w.serverRoots, fv
	})
	c := h.dial(fmt.Sprintf("%s:%d", goodIP, plain.port()))
	defer c.Close()
	first := do(t, c, "GET /h1 HTTP/1.1\r\nHost: allowed.test\r\n\r\n")
	fv.set("api-key", "v2")
	second := do(t, c, "GET /h2 HTTP/1.1\r\nHost: allowed.test\r\n\r\n")
	if len(first)+len(second) != 2 || plain.header("/h1", "Authorization") != "Bearer v1" || plain.header("/h2", "Authorization") != "Bearer v2" || plain.header("/h1", "X-Plain") != "as-is" {
		t.Fatalf("http: %q %q; server saw %v", first, second, plain.seen)
	}
	if len(fv.srcs) == 0 || fv.srcs[0] != netip.MustParseAddr("127.0.0.1") {
		t.Errorf("expanded for %v, want the sandbox 127.0.0.1", fv.srcs)
	}
	tc := tls.Client(h.dial(fmt.Sprintf("%s:%d", goodIP, w.srv.port())), &tls.Config{ServerName: "allowed.test", RootCAs: w.sandboxRoots})
	defer tc.Close()
	got := do(t, tc, "GET /s1 HTTP/1.1\r\nHost: allowed.test\r\n\r\n")
	fv.set("api-key", "")
	got = append(got, do(t, tc, "GET /s2 HTTP/1.1\r\nHost: allowed.test\r\n\r\n")...)
	if len(got) != 2 || w.srv.header("/s1", "Authorization") != "Bearer v2" || w.srv.header("/s2", "Host") != "" {
		t.Fatalf("https: %q; server saw %v", got, w.srv.seen)
	}
	if !strings.HasPrefix(got[1], "502 ") || !strings.Contains(got[1], `secret "api-key" does not exist`) || strings.Contains(got[1], "${") {
		t.Errorf("deleted secret: %q", got[1])
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if n := len(h.denials); n != 1 || h.denials[0].Reason != netpolicy.ReasonPlaceholder || !strings.Contains(h.denials[0].Rule, "Authorization") {
		t.Errorf("denials %+v", h.denials)
	}
}

// A proxy with no Expander never sends a placeholder as written.
func TestPlaceholdersWithoutExpander(t *testing.T) {
	res := startDNS(t)
	srv := startRecorder(t, "A", goodIP+":0", nil)
	h := newHarness(t, policy(t, placeholderRules()), res)
	code, body := h.get(fmt.Sprintf("%s:%d", goodIP, srv.port()), "allowed.test")
	if code != 502 || srv.header("/", "Host") != "" {
		t.Errorf("no expander: %d %q", code, body)
	}
}
