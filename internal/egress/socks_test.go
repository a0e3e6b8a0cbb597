package egress

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	socks5 "github.com/things-go/go-socks5"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/netpolicy"
)

// socksIP is where the test's SOCKS5 server (a real one, from
// github.com/things-go/go-socks5) listens.
const socksIP = "127.0.0.4"

// socksServer records the destination of every CONNECT it accepts, as
// the client sent it (a name, or an address).
type socksServer struct {
	ln   net.Listener
	mu   sync.Mutex
	dsts []string
}

func (s *socksServer) Allow(ctx context.Context, req *socks5.Request) (context.Context, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a := req.RawDestAddr; a.FQDN != "" {
		s.dsts = append(s.dsts, fmt.Sprintf("name %s:%d", a.FQDN, a.Port))
	} else {
		s.dsts = append(s.dsts, fmt.Sprintf("ip %s:%d", a.IP, a.Port))
	}
	return ctx, true
}

func (s *socksServer) seen() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.dsts...)
}

// testResolver resolves testNames for the SOCKS server's remote DNS.
type testResolver struct{ res *net.Resolver }

func (r testResolver) Resolve(ctx context.Context, name string) (context.Context, net.IP, error) {
	addrs, err := r.res.LookupNetIP(ctx, "ip4", name)
	if err != nil || len(addrs) == 0 {
		return ctx, nil, fmt.Errorf("resolve %s: %v", name, err)
	}
	return ctx, net.IP(addrs[0].AsSlice()), nil
}

func startSOCKS(t *testing.T, res *net.Resolver) *socksServer {
	t.Helper()
	ln, err := net.Listen("tcp4", socksIP+":0")
	if err != nil {
		t.Fatal(err)
	}
	s := &socksServer{ln: ln}
	srv := socks5.NewServer(
		socks5.WithCredential(socks5.StaticCredentials{"user": "pa:ss"}),
		socks5.WithResolver(testResolver{res}),
		socks5.WithRule(s),
	)
	go srv.Serve(ln)
	t.Cleanup(func() { ln.Close() })
	return s
}

// speaksFirst is a server that greets before reading, like SSH or SMTP.
func speaksFirst(t *testing.T, addr string) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp4", addr)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("hello first\n"))
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return ln
}

func tunnelRules(addr, user, pass string) netpolicy.Rules {
	r := transformRules("allowed.test")
	r.DenyOut = []string{evilIP}
	r.EgressProxy = &netpolicy.EgressProxy{Address: addr, Username: user, Password: pass}
	return r
}

// Through an egress proxy: a name allowOut lists is sent by name (the
// proxy's end resolves it) with its headers; anything else by address,
// filtered first; a port other than the web ports is relayed unread.
func TestTunnel(t *testing.T) {
	res := startDNS(t)
	web := startRecorder(t, "A", goodIP+":0", nil)
	first := speaksFirst(t, goodIP+":0")
	socks := startSOCKS(t, res)
	webPort := uint16(web.port())
	h := newHarnessWith(t, policy(t, tunnelRules(socks.ln.Addr().String(), "user", "pa:ss")), res,
		func(c *Config) { c.WebPorts = []uint16{webPort} })
	code, body := h.get(fmt.Sprintf("%s:%d", evilIP, webPort), "allowed.test")
	if code != 200 || !strings.HasPrefix(body, "A ") || web.header("/", "Authorization") != "Bearer s3cret" {
		t.Errorf("allowed name through the tunnel: %d %q", code, body)
	}
	c := h.dial(first.Addr().String())
	got, _ := io.ReadAll(c)
	c.Close()
	if string(got) != "hello first\n" {
		t.Errorf("server-speaks-first through the tunnel: %q", got)
	}
	if code, _ := h.get(fmt.Sprintf("%s:%d", evilIP, webPort), "other.test"); code != 403 {
		t.Errorf("a denied address: %d, want 403 before the tunnel", code)
	}
	want := []string{fmt.Sprintf("name allowed.test:%d", webPort), "ip " + first.Addr().String()}
	if s := socks.seen(); strings.Join(s, ",") != strings.Join(want, ",") {
		t.Errorf("the SOCKS server saw %q, want %q", s, want)
	}
}

// The tunnel fails closed: a wrong password, a proxy that is down, or a
// proxy name resolving where the host must not connect get the sandbox
// nothing, and nothing goes direct.
func TestTunnelFailsClosed(t *testing.T) {
	res := startDNS(t)
	web := startRecorder(t, "A", goodIP+":0", nil)
	socks := startSOCKS(t, res)
	port := fmt.Sprint(socks.ln.Addr().(*net.TCPAddr).Port)
	down, _ := net.Listen("tcp4", socksIP+":0")
	downAddr := down.Addr().String()
	down.Close()
	for name, r := range map[string]netpolicy.Rules{
		"wrong password":      tunnelRules(socks.ln.Addr().String(), "user", "wrong"),
		"proxy down":          tunnelRules(downAddr, "user", "pa:ss"),
		"resolves to private": tunnelRules("private.test:"+port, "user", "pa:ss"),
		"does not resolve":    tunnelRules("nowhere.test:"+port, "user", "pa:ss"),
	} {
		h := newHarnessWith(t, policy(t, r), res, func(c *Config) {
			c.WebPorts = []uint16{uint16(web.port())}
			c.DialTimeout = 2 * time.Second
		})
		code, _ := h.get(web.ln.Addr().String(), "allowed.test")
		if code == 200 || web.header("/", "Authorization") != "" {
			t.Errorf("%s: %d; the server saw %v", name, code, web.seen)
		}
	}
}

func TestCheckProxyAddress(t *testing.T) {
	res := startDNS(t)
	ctx := context.Background()
	opened := pfxs("127.0.0.0/8")
	if err := CheckProxyAddress(ctx, res, opened, "allowed.test:1080"); err != nil {
		t.Errorf("a name resolving to an opened address: %v", err)
	}
	for addr, say := range map[string]string{
		"private.test:1080":  "resolves only to addresses",
		"metadata.test:1080": "resolves only to addresses",
		"nowhere.test:1080":  "does not resolve",
		"allowed.test:1080":  "resolves only to addresses", // without 127/8 opened
	} {
		o := opened
		if addr == "allowed.test:1080" {
			o = nil
		}
		err := CheckProxyAddress(ctx, res, o, addr)
		if err == nil || !errdefs.IsInvalidArgument(err) || !strings.Contains(err.Error(), say) {
			t.Errorf("CheckProxyAddress(%s) = %v, want %q", addr, err, say)
		}
	}
}

func pfxs(s ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, p := range s {
		out = append(out, netip.MustParsePrefix(p))
	}
	return out
}
