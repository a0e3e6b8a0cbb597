package egress

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/forkbox/forkbox/internal/netpolicy"
)

func policy(t *testing.T, r netpolicy.Rules) netpolicy.Policy {
	t.Helper()
	_, p, err := netpolicy.Compile(r, true, []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestHTTPHostRules(t *testing.T) {
	res := startDNS(t)
	good := startServer(t, "A", goodIP+":0", nil)
	port := good.ln.Addr().(*net.TCPAddr).Port
	evil := startServer(t, "B", fmt.Sprintf("%s:%d", evilIP, port), nil)
	h := newHarness(t, policy(t, netpolicy.Rules{
		AllowOut: []string{"allowed.test", "*.wild.test", "private.test", "metadata.test", "rebinding.test"},
		DenyOut:  []string{"0.0.0.0/0"},
	}), res)
	at := func(ip string) string { return fmt.Sprintf("%s:%d", ip, port) }
	tests := []struct {
		name, dst, host string
		code            int
		body            string // prefix
	}{
		{"allowed name", at(goodIP), "allowed.test", 200, "A host=allowed.test"},
		{"allowed name with port and case", at(goodIP), fmt.Sprintf("Allowed.Test:%d", port), 200, "A "},
		{"unlisted name on the same IP", at(goodIP), "other.test", 403, "forkbox egress: other.test is not allowed"},
		{"allowed name sent to another IP goes to the name's", at(evilIP), "allowed.test", 200, "A host=allowed.test"},
		{"wildcard", at(goodIP), "a.wild.test", 200, "A "},
		{"wildcard, any depth", at(goodIP), "x.y.wild.test", 200, "A "},
		{"wildcard, not the apex", at(goodIP), "wild.test", 403, ""},
		{"name resolving to a private address", at(goodIP), "private.test", 403, "forkbox egress: private.test is not allowed (private.test resolves only to forbidden"},
		{"name resolving to the metadata address", at(goodIP), "metadata.test", 403, ""},
		{"rebinding to a private address", at(goodIP), "rebinding.test", 403, ""},
		{"IP literal as Host follows the address rules", at(goodIP), goodIP, 403, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body := h.get(tt.dst, tt.host)
			if code != tt.code || !strings.HasPrefix(body, tt.body) {
				t.Errorf("GET Host %s via %s = %d %q, want %d %q…", tt.host, tt.dst, code, body, tt.code, tt.body)
			}
		})
	}
	if n := evil.conns.Load(); n != 0 {
		t.Errorf("the other server got %d connections", n)
	}
	if _, body := h.get(at(goodIP), "allowed.test"); !strings.Contains(body, `ua=""`) {
		t.Errorf("the proxy changed the request's User-Agent: %q", body)
	}
	if st := h.proxy.Stats(); st.Denied < 6 || st.Allowed < 5 {
		t.Errorf("stats = %+v", st)
	}
}

// A keep-alive connection may not switch to a host the first request was
// not judged for.
func TestHTTPSecondHostRefused(t *testing.T) {
	res := startDNS(t)
	good := startServer(t, "A", goodIP+":0", nil)
	dst := good.ln.Addr().String()
	h := newHarness(t, policy(t, netpolicy.Rules{AllowOut: []string{"allowed.test"}, DenyOut: []string{"0.0.0.0/0"}}), res)
	c := h.dial(dst)
	defer c.Close()
	br := bufio.NewReader(c)
	fmt.Fprintf(c, "GET /1 HTTP/1.1\r\nHost: allowed.test\r\n\r\n")
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("first request: %v %v", resp, err)
	}
	io.Copy(io.Discard, resp.Body)
	fmt.Fprintf(c, "GET /2 HTTP/1.1\r\nHost: other.test\r\n\r\n")
	if resp, err := http.ReadResponse(br, nil); err == nil {
		t.Fatalf("second host answered: %d", resp.StatusCode)
	}
}

func TestTLSSNIRules(t *testing.T) {
	res := startDNS(t)
	cfg, roots := testCerts(t)
	good := startServer(t, "A", goodIP+":0", cfg)
	port := good.ln.Addr().(*net.TCPAddr).Port
	evil := startServer(t, "B", fmt.Sprintf("%s:%d", evilIP, port), cfg)
	h := newHarness(t, policy(t, netpolicy.Rules{AllowOut: []string{"allowed.test", "*.wild.test"}, DenyOut: []string{"0.0.0.0/0"}}), res)
	at := func(ip string) string { return fmt.Sprintf("%s:%d", ip, port) }
	tests := []struct {
		name, dst, sni string
		ok             bool
	}{
		{"allowed SNI", at(goodIP), "allowed.test", true},
		{"wildcard SNI", at(goodIP), "x.y.wild.test", true},
		{"unlisted SNI on the same IP", at(goodIP), "other.test", false},
		{"apex of a wildcard", at(goodIP), "wild.test", false},
		{"allowed SNI sent to another IP goes to the name's", at(evilIP), "allowed.test", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body, err := h.getTLS(tt.dst, tt.sni, roots)
			if tt.ok && (err != nil || !strings.HasPrefix(body, "A host="+tt.sni)) {
				t.Errorf("SNI %s via %s: %q, %v; want A's answer", tt.sni, tt.dst, body, err)
			}
			if !tt.ok && err == nil {
				t.Errorf("SNI %s via %s got through: %q", tt.sni, tt.dst, body)
			}
		})
	}
	if n := evil.conns.Load(); n != 0 {
		t.Errorf("the other server got %d connections", n)
	}
}

// Without names to judge by, the address rules decide.
func TestAddressRulesThroughTheProxy(t *testing.T) {
	res := startDNS(t)
	good := startServer(t, "A", goodIP+":0", nil)
	port := good.ln.Addr().(*net.TCPAddr).Port
	startServer(t, "B", fmt.Sprintf("%s:%d", evilIP, port), nil)
	h := newHarness(t, policy(t, netpolicy.Rules{AllowOut: []string{"allowed.test"}, DenyOut: []string{evilIP}}), res)
	if code, body := h.get(fmt.Sprintf("%s:%d", goodIP, port), "unlisted.a.test"); code != 200 || !strings.HasPrefix(body, "A ") {
		t.Errorf("an undenied address with an unlisted name: %d %q", code, body)
	}
	if code, _ := h.get(fmt.Sprintf("%s:%d", evilIP, port), "evil.test"); code != 403 {
		t.Errorf("a denied address: %d, want 403", code)
	}
	// Not HTTP at all: judged by the address, bytes passed as they are.
	c := h.dial(fmt.Sprintf("%s:%d", evilIP, port))
	defer c.Close()
	c.Write([]byte("\x00\x01 not http\r\n\r\n"))
	if n, _ := c.Read(make([]byte, 1)); n != 0 {
		t.Errorf("a denied address answered raw bytes")
	}
}

// Close cuts relays even when neither end is talking.
func TestCloseCutsIdleRelays(t *testing.T) {
	res := startDNS(t)
	ln, err := net.Listen("tcp4", goodIP+":0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() { // accepts and never answers
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	h := newHarness(t, policy(t, netpolicy.Rules{AllowOut: []string{"allowed.test"}}), res)
	c := h.dial(ln.Addr().String())
	defer c.Close()
	fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: allowed.test\r\n\r\n")
	time.Sleep(100 * time.Millisecond) // the relay is up
	done := make(chan struct{})
	go func() { h.proxy.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(3 * time.Second):
		t.Fatal("Close hangs on an idle relay")
	}
}
