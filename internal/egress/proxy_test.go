package egress

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/forkbox/forkbox/internal/netpolicy"
)

// The test's world lives on loopback only: "outside" servers on 127.0.0.2
// (the allowed names' address) and 127.0.0.3 (another server), a DNS
// server the test controls, and the proxy, whose original destinations the
// test supplies (the kernel redirect is tested end to end in test/e2e).
// 127.0.0.0/8 is opened as an operator would open a range.
const (
	goodIP = "127.0.0.2"
	evilIP = "127.0.0.3"
)

var testNames = map[string]string{
	"allowed.test.":    goodIP,
	"other.test.":      goodIP,
	"a.wild.test.":     goodIP,
	"x.y.wild.test.":   goodIP,
	"wild.test.":       goodIP,
	"private.test.":    "10.1.2.3",
	"metadata.test.":   "169.254.169.254",
	"evil.test.":       evilIP,
	"allowed2.test.":   evilIP,
	"rebinding.test.":  "192.168.7.7",
	"unlisted.a.test.": goodIP,
}

// startDNS serves testNames and returns a resolver that asks only it.
func startDNS(t *testing.T) *net.Resolver {
	t.Helper()
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := dns.NewServeMux()
	mux.HandleFunc(".", func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		q := r.Question[0]
		if ip, ok := testNames[strings.ToLower(q.Name)]; ok && q.Qtype == dns.TypeA {
			m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 5}, A: net.ParseIP(ip)})
		} else if !ok {
			m.Rcode = dns.RcodeNameError
		}
		w.WriteMsg(m)
	})
	srv := &dns.Server{PacketConn: pc, Handler: mux}
	go srv.ActivateAndServe()
	t.Cleanup(func() { srv.Shutdown() })
	addr := pc.LocalAddr().String()
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp4", addr)
	}}
}

// server is an HTTP or HTTPS server on one address that says its name
// and counts connections.
type server struct {
	name  string
	conns atomic.Int64
	ln    net.Listener
}

func startServer(t *testing.T, name, addr string, cfg *tls.Config) *server {
	t.Helper()
	ln, err := net.Listen("tcp4", addr)
	if err != nil {
		t.Fatal(err)
	}
	s := &server{name: name, ln: ln}
	counted := &countingListener{Listener: ln, n: &s.conns}
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s host=%s ua=%q", name, r.Host, r.UserAgent())
	})}
	if cfg != nil {
		go hs.Serve(tls.NewListener(counted, cfg))
	} else {
		go hs.Serve(counted)
	}
	t.Cleanup(func() { hs.Close() })
	return s
}

type countingListener struct {
	net.Listener
	n *atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
}

// testCA issues one server certificate for every test name.
func testCerts(t *testing.T) (*tls.Config, *x509.CertPool) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "egress test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		DNSNames: []string{"allowed.test", "other.test", "*.wild.test", "wild.test", "x.y.wild.test", "evil.test", "private.test"},
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, IsCA: true, BasicConstraintsValid: true,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tpl, tpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}, pool
}

// harness is a proxy whose original destinations the test names per
// client connection (by the client's local address).
type harness struct {
	t     *testing.T
	proxy *Proxy
	addr  string
	mu    sync.Mutex
	dsts  map[string]netip.AddrPort
	pol   netpolicy.Policy
	// denials are what the proxy reported through Config.OnDeny.
	denials []netpolicy.Denial
}

func newHarness(t *testing.T, pol netpolicy.Policy, res *net.Resolver) *harness {
	t.Helper()
	return newHarnessWith(t, pol, res, nil)
}

// newHarnessWith is newHarness with the proxy's Config changed by edit.
func newHarnessWith(t *testing.T, pol netpolicy.Policy, res *net.Resolver, edit func(*Config)) *harness {
	t.Helper()
	h := &harness{t: t, dsts: map[string]netip.AddrPort{}, pol: pol}
	cfg := Config{
		Policies: PolicyFunc(func(src netip.Addr) (netpolicy.Policy, bool) {
			h.mu.Lock()
			defer h.mu.Unlock()
			return h.pol, src == netip.MustParseAddr("127.0.0.1")
		}),
		Opened:   []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
		Resolver: res,
		OriginalDst: func(c net.Conn) (netip.AddrPort, error) {
			for i := 0; i < 200; i++ {
				h.mu.Lock()
				d, ok := h.dsts[c.RemoteAddr().String()]
				h.mu.Unlock()
				if ok {
					return d, nil
				}
				time.Sleep(5 * time.Millisecond)
			}
			return netip.AddrPort{}, fmt.Errorf("no destination for %s", c.RemoteAddr())
		},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		OnDeny: func(src netip.Addr, d netpolicy.Denial) {
			h.mu.Lock()
			h.denials = append(h.denials, d)
			h.mu.Unlock()
		},
	}
	if edit != nil {
		edit(&cfg)
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go p.Serve(ln)
	t.Cleanup(func() { p.Close() })
	h.proxy, h.addr = p, ln.Addr().String()
	return h
}

// setPolicy changes the policy of the harness's sandbox.
func (h *harness) setPolicy(p netpolicy.Policy) {
	h.mu.Lock()
	h.pol = p
	h.mu.Unlock()
}

// dial connects "to dst" through the proxy, as a redirected sandbox would.
func (h *harness) dial(dst string) net.Conn {
	h.t.Helper()
	c, err := net.Dial("tcp4", h.addr)
	if err != nil {
		h.t.Fatal(err)
	}
	h.mu.Lock()
	h.dsts[c.LocalAddr().String()] = netip.MustParseAddrPort(dst)
	h.mu.Unlock()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	return c
}

// get sends a plain GET with host to dst and returns the body ("" if the
// connection was refused without an answer) and the status.
func (h *harness) get(dst, host string) (int, string) {
	c := h.dial(dst)
	defer c.Close()
	fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", host)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0, ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// getTLS does a verified HTTPS GET with SNI sni to dst.
func (h *harness) getTLS(dst, sni string, roots *x509.CertPool) (string, error) {
	c := h.dial(dst)
	defer c.Close()
	tc := tls.Client(c, &tls.Config{ServerName: sni, RootCAs: roots})
	if err := tc.Handshake(); err != nil {
		return "", err
	}
	fmt.Fprintf(tc, "GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", sni)
	resp, err := http.ReadResponse(bufio.NewReader(tc), nil)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b), nil
}
