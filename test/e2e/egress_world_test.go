package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	socks5 "github.com/things-go/go-socks5"
)

// What the servers of the egress world saw, and its SOCKS5 server (a real
// one, github.com/things-go/go-socks5, with username and password), which
// listens in the outside namespace on egrSocks. The test's control server,
// on the host's loopback where no sandbox reaches, tells the JavaScript
// tests what was seen and stops and starts the SOCKS server.
const (
	egrSocks     = "198.51.100.13"
	egrSocksPort = 1080
	egrSocksUser = "forkbox"
	egrSocksPass = "s0cks-pa55word"
)

// seenLog keeps the headers of every request to a /rec/ path, by server
// and path, and the SOCKS server's CONNECT destinations.
type seenLog struct {
	mu      sync.Mutex
	headers map[string]http.Header // "A /rec/x" → headers
	socks   []string               // "name host:port" or "ip addr:port"
}

func newSeenLog() *seenLog { return &seenLog{headers: map[string]http.Header{}} }

// record keeps r's headers when its path is under /rec/.
func (s *seenLog) record(server string, r *http.Request) {
	if !strings.HasPrefix(r.URL.Path, "/rec/") {
		return
	}
	s.mu.Lock()
	s.headers[server+" "+r.URL.Path] = r.Header.Clone()
	s.mu.Unlock()
}

// Allow implements socks5.RuleSet: it records each CONNECT as the client
// stated it (a name or an address) and lets it through.
func (s *seenLog) Allow(ctx context.Context, req *socks5.Request) (context.Context, bool) {
	a := req.RawDestAddr
	entry := fmt.Sprintf("ip %s:%d", a.IP, a.Port)
	if a.FQDN != "" {
		entry = fmt.Sprintf("name %s:%d", a.FQDN, a.Port)
	}
	s.mu.Lock()
	s.socks = append(s.socks, entry)
	s.mu.Unlock()
	return ctx, true
}

// egrResolver resolves the test zone for the SOCKS server's remote DNS.
type egrResolver struct{}

func (egrResolver) Resolve(ctx context.Context, name string) (context.Context, net.IP, error) {
	ip, ok := egrNames[strings.ToLower(strings.TrimSuffix(name, "."))+"."]
	if !ok {
		return ctx, nil, fmt.Errorf("%s: no such test name", name)
	}
	return ctx, net.ParseIP(ip), nil
}

// socksServer runs the SOCKS5 server in the outside namespace; stop and
// start let a test take it down.
type socksServer struct {
	t    *testing.T
	seen *seenLog
	mu   sync.Mutex
	ln   net.Listener
}

func (s *socksServer) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln != nil {
		return nil
	}
	var err error
	inEgressNS(s.t, func() error {
		s.ln, err = net.Listen("tcp4", fmt.Sprintf("%s:%d", egrSocks, egrSocksPort))
		return nil
	})
	if err != nil {
		return err
	}
	srv := socks5.NewServer(socks5.WithCredential(socks5.StaticCredentials{egrSocksUser: egrSocksPass}),
		socks5.WithResolver(egrResolver{}), socks5.WithRule(s.seen))
	go srv.Serve(s.ln)
	return nil
}

func (s *socksServer) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln != nil {
		s.ln.Close()
		s.ln = nil
	}
}

// startEgressWorld starts the outside servers (with a test CA's
// certificate, whose PEM it returns) and the SOCKS5 server, recording what
// they see; setupEgressOutside must have run.
func startEgressWorld(t *testing.T) (*seenLog, *socksServer, string) {
	t.Helper()
	cert, caPEM := egressCert(t)
	seen := newSeenLog()
	startEgressServers(t, cert, seen)
	socks := &socksServer{t: t, seen: seen}
	if err := socks.start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(socks.stop)
	return seen, socks, caPEM
}

// startControl serves the seen log and the SOCKS switch on loopback:
// GET /headers?key=A%20/rec/x, GET /socks, POST /socks/stop, /socks/start.
func startControl(t *testing.T, seen *seenLog, socks *socksServer) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /headers", func(w http.ResponseWriter, r *http.Request) {
		seen.mu.Lock()
		h := seen.headers[r.URL.Query().Get("key")]
		seen.mu.Unlock()
		json.NewEncoder(w).Encode(h)
	})
	mux.HandleFunc("GET /socks", func(w http.ResponseWriter, r *http.Request) {
		seen.mu.Lock()
		defer seen.mu.Unlock()
		json.NewEncoder(w).Encode(append([]string{}, seen.socks...))
	})
	mux.HandleFunc("POST /socks/stop", func(w http.ResponseWriter, r *http.Request) { socks.stop() })
	mux.HandleFunc("POST /socks/start", func(w http.ResponseWriter, r *http.Request) {
		if err := socks.start(); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
		}
	})
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String()
}

// selfSigned returns a certificate and key (PEM) for a server inside a
// sandbox (httpsPorts): self-signed, which the data plane accepts.
func selfSigned(t *testing.T) (certPEM, keyPEM string) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "inside"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), DNSNames: []string{"localhost"}}
	der, err := x509.CreateCertificate(rand.Reader, tpl, tpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalPKCS8PrivateKey(key)
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}))
}

// writeCAFile puts the test CA where --egress-ca-file reads it: the
// daemon's proxy verifies the outside HTTPS servers with it.
func writeCAFile(t *testing.T, caPEM string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "egress-test-ca.pem")
	if err := os.WriteFile(p, []byte(caPEM), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// header returns header name of the request key ("A /rec/x") saw.
func (s *seenLog) header(key, name string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.headers[key].Get(name)
}

// socksSeen returns the SOCKS server's CONNECTs so far.
func (s *seenLog) socksSeen() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.socks...)
}
