package netns

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/forkbox/forkbox/internal/netpolicy"
)

// answer dials addr from the namespace at nsPath and returns the first two
// bytes it answers ("" if none).
func answer(t *testing.T, nsPath, addr string) string {
	t.Helper()
	var c net.Conn
	var err error
	inNS(t, nsPath, func() { c, err = net.DialTimeout("tcp4", addr, 700*time.Millisecond) })
	if err != nil {
		return ""
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Second))
	b := make([]byte, 2)
	n, _ := c.Read(b)
	return string(b[:n])
}

// TestPolicyRedirects: which of a sandbox's connections the kernel hands
// to the egress proxy (a stand-in answering "px" here): none without
// names, headers or a tunnel; ports 80 and 443 for names or headers; every
// TCP port but DNS to the resolver for a tunnel. The saved policy, which
// holds secrets, is readable by root only.
func TestPolicyRedirects(t *testing.T) {
	ctx := context.Background()
	out := setupOutside(t)
	srv := outAddrs[0]
	for _, port := range []int{80, 443, 8080, 53} {
		listenOutside(t, out, srv, port)
	}
	proxy, err := net.Listen("tcp4", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	go func() {
		for {
			c, err := proxy.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("px"))
			c.Close()
		}
	}()
	cfg := testConfig(t)
	cfg.ResolvConf = filepath.Join(t.TempDir(), "resolv.conf")
	writeFile(t, cfg.ResolvConf, "nameserver "+srv+"\n")
	cfg.StateDir = t.TempDir()
	cfg.EgressPort = uint16(proxy.Addr().(*net.TCPAddr).Port)
	m, err := New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(ctx)
	l, err := m.Allocate(ctx, "rdrt", true)
	if err != nil {
		t.Fatal(err)
	}
	// The host's own processes reach the port on loopback: a table left by
	// a killed daemon must not black-hole the next local server on it.
	if c, err := net.DialTimeout("tcp4", fmt.Sprintf("127.0.0.1:%d", cfg.EgressPort), 2*time.Second); err != nil {
		t.Errorf("the host cannot reach the proxy's port on loopback: %v", err)
	} else {
		c.Close()
	}
	rules := map[string][]netpolicy.Rule{"a.test": {{Transform: &netpolicy.Transform{Headers: map[string]string{"X-A": "1"}}}}}
	tunnel := &netpolicy.EgressProxy{Address: "198.51.100.99:1080", Username: "u", Password: "secret"}
	tests := []struct {
		name  string
		rules netpolicy.Rules
		want  map[string]string // addr → answer
	}{
		{"address rules only", netpolicy.Rules{DenyOut: []string{"198.51.100.99"}},
			map[string]string{":80": "ok", ":443": "ok", ":8080": "ok", ":53": "ok"}},
		{"names", netpolicy.Rules{AllowOut: []string{"a.test"}},
			map[string]string{":80": "px", ":443": "px", ":8080": "ok", ":53": "ok"}},
		{"rules alone", netpolicy.Rules{Rules: rules},
			map[string]string{":80": "px", ":443": "px", ":8080": "ok", ":53": "ok"}},
		{"tunnel", netpolicy.Rules{EgressProxy: tunnel},
			map[string]string{":80": "px", ":443": "px", ":8080": "px", ":53": "ok", metadataIP + ":8080": "px"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := m.SetPolicy(ctx, l.ID, compile(t, tt.rules, true)); err != nil {
				t.Fatalf("SetPolicy: %v", err)
			}
			for dst, want := range tt.want {
				if dst[0] == ':' {
					dst = srv + dst
				}
				if got := answer(t, l.NSPath, dst); got != want {
					t.Errorf("%s answered %q, want %q", dst, got, want)
				}
			}
		})
	}
	fi, err := os.Stat(m.policyPath(l.ID))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("saved policy: %v, mode %v; want 0600", err, fi.Mode())
	}
	if b, _ := os.ReadFile(m.policyPath(l.ID)); !strings.Contains(string(b), `"password":"secret"`) {
		t.Errorf("the saved policy lacks the tunnel: %s", b)
	}
	m.cfg.EgressPort = 0 // the proxy is off
	defer func() { m.cfg.EgressPort = cfg.EgressPort }()
	if err := m.SetPolicy(ctx, l.ID, compile(t, netpolicy.Rules{EgressProxy: tunnel}, true)); err == nil {
		t.Errorf("a tunnel without the egress proxy was accepted")
	}
}
