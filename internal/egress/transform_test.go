package egress

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/forkbox/forkbox/internal/netpolicy"
	"github.com/forkbox/forkbox/internal/tlsca"
)

// recorder is a server that keeps the headers of each request by path and
// answers without echoing them; /ws switches protocols and echoes bytes.
type recorder struct {
	name string
	ln   net.Listener
	mu   sync.Mutex
	seen map[string]http.Header
}

func startRecorder(t *testing.T, name, addr string, cfg *tls.Config) *recorder {
	t.Helper()
	ln, err := net.Listen("tcp4", addr)
	if err != nil {
		t.Fatal(err)
	}
	r := &recorder{name: name, ln: ln, seen: map[string]http.Header{}}
	hs := &http.Server{Handler: http.HandlerFunc(r.serve)}
	if cfg != nil {
		cfg = cfg.Clone()
		cfg.NextProtos = []string{"h2", "http/1.1"}
		go hs.Serve(tls.NewListener(ln, cfg))
	} else {
		go hs.Serve(ln)
	}
	t.Cleanup(func() { hs.Close() })
	return r
}

func (r *recorder) serve(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	r.seen[req.URL.Path] = req.Header.Clone()
	r.mu.Unlock()
	if req.URL.Path == "/ws" && strings.EqualFold(req.Header.Get("Upgrade"), "echo") {
		c, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer c.Close()
		brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
		brw.Flush()
		io.Copy(c, brw)
		return
	}
	fmt.Fprintf(w, "%s %s proto=%s", r.name, req.URL.Path, req.Proto)
}

// header returns what the server saw of header name on path ("" if the
// request never arrived).
func (r *recorder) header(path, name string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.seen[path].Get(name)
}

func (r *recorder) port() int { return r.ln.Addr().(*net.TCPAddr).Port }

// egressCA is a real forkbox CA (internal/tlsca) in a temporary dir.
func egressCA(t *testing.T) (*tlsca.CA, *x509.CertPool) {
	t.Helper()
	ca, err := tlsca.LoadOrCreateCA(t.TempDir(), "forkbox egress test CA")
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	return ca, pool
}

// do sends raw requests on one connection and returns the responses.
func do(t *testing.T, c net.Conn, reqs ...string) []string {
	t.Helper()
	br := bufio.NewReader(c)
	var out []string
	for _, r := range reqs {
		if _, err := io.WriteString(c, r); err != nil {
			return out
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			return out
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		out = append(out, fmt.Sprintf("%d %s", resp.StatusCode, b))
	}
	return out
}

func transformRules(allow ...string) netpolicy.Rules {
	return netpolicy.Rules{
		AllowOut: allow,
		DenyOut:  []string{"0.0.0.0/0"},
		Rules: map[string][]netpolicy.Rule{
			"allowed.test":  {{Transform: &netpolicy.Transform{Headers: map[string]string{"Authorization": "Bearer first"}}}, {Transform: &netpolicy.Transform{Headers: map[string]string{"authorization": "Bearer s3cret", "X-Rule": "exact"}}}},
			"*.wild.test":   {{Transform: &netpolicy.Transform{Headers: map[string]string{"X-Rule": "wild"}}}},
			"x.y.wild.test": {{Transform: &netpolicy.Transform{Headers: map[string]string{"X-Rule": "deep-exact"}}}},
		},
	}
}

// Plain HTTP: every request of a connection gets its host's headers, which
// replace the sandbox's own; the exact key beats the wildcard.
func TestHTTPTransforms(t *testing.T) {
	res := startDNS(t)
	srv := startRecorder(t, "A", goodIP+":0", nil)
	h := newHarness(t, policy(t, transformRules("allowed.test", "*.wild.test")), res)
	dst := fmt.Sprintf("%s:%d", goodIP, srv.port())
	c := h.dial(dst)
	defer c.Close()
	got := do(t, c,
		"GET /1 HTTP/1.1\r\nHost: allowed.test\r\nAuthorization: Bearer mine\r\n\r\n",
		"GET /2 HTTP/1.1\r\nHost: allowed.test\r\n\r\n")
	if len(got) != 2 || strings.Contains(strings.Join(got, " "), "s3cret") {
		t.Fatalf("responses %q", got)
	}
	for _, path := range []string{"/1", "/2"} {
		if a, r := srv.header(path, "Authorization"), srv.header(path, "X-Rule"); a != "Bearer s3cret" || r != "exact" {
			t.Errorf("%s: server saw Authorization %q X-Rule %q", path, a, r)
		}
	}
	for host, want := range map[string]string{"a.wild.test": "wild", "x.y.wild.test": "deep-exact"} {
		c := h.dial(dst)
		do(t, c, "GET /"+host+" HTTP/1.1\r\nHost: "+host+"\r\nConnection: close\r\n\r\n")
		c.Close()
		if got := srv.header("/"+host, "X-Rule"); got != want {
			t.Errorf("%s: X-Rule %q, want %q", host, got, want)
		}
	}
}

// A transform's request goes to its name's own address, never to the one
// the sandbox dialled; and a rule grants nothing the address rules deny.
func TestTransformsGrantNothing(t *testing.T) {
	res := startDNS(t)
	good := startRecorder(t, "A", goodIP+":0", nil)
	evil := startRecorder(t, "B", fmt.Sprintf("%s:%d", evilIP, good.port()), nil)
	open := transformRules()
	open.DenyOut = nil // no address rule: everything may be reached
	h := newHarness(t, policy(t, open), res)
	code, body := h.get(fmt.Sprintf("%s:%d", evilIP, good.port()), "allowed.test")
	if code != 200 || !strings.HasPrefix(body, "A ") || evil.header("/", "Authorization") != "" || good.header("/", "Authorization") != "Bearer s3cret" {
		t.Errorf("Host allowed.test dialled at B: %d %q; B saw %q", code, body, evil.header("/", "Authorization"))
	}
	h.setPolicy(policy(t, transformRules())) // deny all, no allowOut
	if code, _ := h.get(fmt.Sprintf("%s:%d", goodIP, good.port()), "allowed.test"); code != 403 {
		t.Errorf("rules without allowOut: %d, want 403", code)
	}
}

// tlsWorld is an HTTPS recorder with a test CA's certificate, the egress
// CA the proxy intercepts with, and the pools trusting each.
type tlsWorld struct {
	res                       *net.Resolver
	srv                       *recorder
	ca                        *tlsca.CA
	sandboxRoots, serverRoots *x509.CertPool
}

func newTLSWorld(t *testing.T) *tlsWorld {
	t.Helper()
	cfg, serverRoots := testCerts(t)
	ca, sandboxRoots := egressCA(t)
	return &tlsWorld{res: startDNS(t), srv: startRecorder(t, "A", goodIP+":0", cfg), ca: ca,
		sandboxRoots: sandboxRoots, serverRoots: serverRoots}
}

// harness is a proxy intercepting with w's egress CA and verifying
// upstreams with roots.
func (w *tlsWorld) harness(t *testing.T, rules netpolicy.Rules, roots *x509.CertPool) *harness {
	return newHarnessWith(t, policy(t, rules), w.res, func(c *Config) { c.CA, c.RootCAs = w.ca, roots })
}

func tlsHarness(t *testing.T, rules netpolicy.Rules) (*harness, *recorder, *x509.CertPool, *x509.CertPool) {
	t.Helper()
	w := newTLSWorld(t)
	return w.harness(t, rules, w.serverRoots), w.srv, w.sandboxRoots, w.serverRoots
}

// HTTPS to a name with a transform is terminated with the egress CA,
// each request gets the headers, and the upstream is verified.
func TestTLSInterception(t *testing.T) {
	h, srv, sandboxRoots, serverRoots := tlsHarness(t, transformRules("allowed.test", "other.test"))
	dst := fmt.Sprintf("%s:%d", goodIP, srv.port())
	c := h.dial(dst)
	tc := tls.Client(c, &tls.Config{ServerName: "allowed.test", RootCAs: sandboxRoots, NextProtos: []string{"h2", "http/1.1"}})
	if err := tc.Handshake(); err != nil {
		t.Fatalf("sandbox handshake with the egress CA: %v", err)
	}
	if st := tc.ConnectionState(); st.NegotiatedProtocol != "http/1.1" || st.PeerCertificates[0].Issuer.CommonName != "forkbox egress test CA" {
		t.Errorf("ALPN %q issuer %q", st.NegotiatedProtocol, st.PeerCertificates[0].Issuer.CommonName)
	}
	got := do(t, tc, "GET /s1 HTTP/1.1\r\nHost: allowed.test\r\n\r\n", "GET /s2 HTTP/1.1\r\nHost: Allowed.Test:443\r\n\r\n")
	tc.Close()
	if len(got) != 2 || srv.header("/s1", "Authorization") != "Bearer s3cret" || srv.header("/s2", "X-Rule") != "exact" {
		t.Errorf("responses %q; server saw %v", got, srv.seen)
	}
	// Without a transform the session stays end to end: the server's own
	// certificate, which the egress CA does not vouch for.
	c = h.dial(dst)
	defer c.Close()
	pt := tls.Client(c, &tls.Config{ServerName: "other.test", RootCAs: serverRoots})
	if err := pt.Handshake(); err != nil {
		t.Errorf("passthrough: %v", err)
	}
}

// A Host other than the SNI is refused before any request goes upstream.
func TestTLSInterceptionHostMismatch(t *testing.T) {
	h, srv, sandboxRoots, _ := tlsHarness(t, transformRules("allowed.test", "other.test"))
	c := h.dial(fmt.Sprintf("%s:%d", goodIP, srv.port()))
	defer c.Close()
	tc := tls.Client(c, &tls.Config{ServerName: "allowed.test", RootCAs: sandboxRoots})
	got := do(t, tc, "GET /front HTTP/1.1\r\nHost: other.test\r\n\r\n")
	if len(got) != 1 || !strings.HasPrefix(got[0], "421 ") || srv.header("/front", "Authorization") != "" {
		t.Errorf("Host≠SNI: %q", got)
	}
	h.mu.Lock()
	denials := h.denials
	h.mu.Unlock()
	if len(denials) != 1 || denials[0].Reason != netpolicy.ReasonHostSwitch || denials[0].Name != "other.test" {
		t.Errorf("denials %+v", denials)
	}
	// A later request naming another host ends the connection.
	c2 := h.dial(fmt.Sprintf("%s:%d", goodIP, srv.port()))
	defer c2.Close()
	tc2 := tls.Client(c2, &tls.Config{ServerName: "allowed.test", RootCAs: sandboxRoots})
	if got := do(t, tc2, "GET /ok HTTP/1.1\r\nHost: allowed.test\r\n\r\n", "GET /front2 HTTP/1.1\r\nHost: other.test\r\n\r\n"); len(got) != 1 || srv.header("/front2", "Host") != "" {
		t.Errorf("second host: %q", got)
	}
}

// An upstream the proxy cannot verify gets nothing; a WebSocket upgrade
// passes with the headers set.
func TestTLSInterceptionUpstream(t *testing.T) {
	w := newTLSWorld(t)
	h := w.harness(t, transformRules("allowed.test"), w.serverRoots)
	dst := fmt.Sprintf("%s:%d", goodIP, w.srv.port())
	c := h.dial(dst)
	defer c.Close()
	tc := tls.Client(c, &tls.Config{ServerName: "allowed.test", RootCAs: w.sandboxRoots})
	fmt.Fprintf(tc, "GET /ws HTTP/1.1\r\nHost: allowed.test\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
	br := bufio.NewReader(tc)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 101 {
		t.Fatalf("upgrade: %v %v", resp, err)
	}
	tc.Write([]byte("ping"))
	b := make([]byte, 4)
	c.SetReadDeadline(time.Now().Add(3 * time.Second))
	if _, err := io.ReadFull(br, b); err != nil || string(b) != "ping" || w.srv.header("/ws", "Authorization") != "Bearer s3cret" {
		t.Errorf("echo %q %v; upgrade saw Authorization %q", b, err, w.srv.header("/ws", "Authorization"))
	}
	// A proxy that does not trust the server's certificate sends nothing.
	strict := w.harness(t, transformRules("allowed.test"), x509.NewCertPool())
	c2 := strict.dial(dst)
	defer c2.Close()
	tc2 := tls.Client(c2, &tls.Config{ServerName: "allowed.test", RootCAs: w.sandboxRoots})
	if got := do(t, tc2, "GET /unverified HTTP/1.1\r\nHost: allowed.test\r\n\r\n"); len(got) != 1 || !strings.HasPrefix(got[0], "502 ") || w.srv.header("/unverified", "Authorization") != "" {
		t.Errorf("unverified upstream: %q", got)
	}
}
