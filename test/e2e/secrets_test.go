package e2e

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
)

// The relying party of the workload identity test: a server in the egress
// test's outside namespace, reached by the name rp.egress.test.
const (
	secRP     = "198.51.100.14"
	secRPName = "rp.egress.test."
)

// relyingParty verifies bearer tokens with github.com/coreos/go-oidc
// against the daemon's discovery document and JWKS (fetched from the
// daemon on the host's loopback: only its listeners are in the outside
// namespace). GET /verify[?aud=] answers the token's claims, or 401 with
// go-oidc's reason; the raw tokens are kept by sandbox for the test.
type relyingParty struct {
	issuer string
	mu     sync.Mutex
	tokens map[string]string // sandbox id → last raw token
}

func (rp *relyingParty) verify(w http.ResponseWriter, r *http.Request) {
	raw, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		http.Error(w, "no bearer token", http.StatusUnauthorized)
		return
	}
	aud := r.URL.Query().Get("aud")
	if aud == "" {
		aud = "https://rp.egress.test"
	}
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	p, err := oidc.NewProvider(ctx, rp.issuer)
	if err != nil {
		http.Error(w, "discovery: "+err.Error(), http.StatusBadGateway)
		return
	}
	idt, err := p.Verifier(&oidc.Config{ClientID: aud, SupportedSigningAlgs: []string{oidc.ES256}}).Verify(ctx, raw)
	if err != nil {
		http.Error(w, "invalid token: "+err.Error(), http.StatusUnauthorized)
		return
	}
	var c struct {
		SandboxID string `json:"sandbox_id"`
		Exp       int64  `json:"exp"`
		Iat       int64  `json:"iat"`
	}
	if err := idt.Claims(&c); err != nil {
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	rp.mu.Lock()
	rp.tokens[c.SandboxID] = raw
	rp.mu.Unlock()
	json.NewEncoder(w).Encode(map[string]any{"sub": idt.Subject, "aud": idt.Audience, "iss": idt.Issuer,
		"sandbox_id": c.SandboxID, "exp": c.Exp, "iat": c.Iat})
}

// start serves the relying party on secRP:80 and :443 in the outside
// namespace, and its token log on loopback; it returns the log's URL.
func (rp *relyingParty) start(t *testing.T, cert tls.Certificate) string {
	t.Helper()
	ipCmd(t, "-n", egrNS, "addr", "add", secRP+"/24", "dev", egrNSLink)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /verify", rp.verify)
	var plain, secure net.Listener
	inEgressNS(t, func() (err error) {
		if plain, err = net.Listen("tcp4", secRP+":80"); err != nil {
			return err
		}
		secure, err = net.Listen("tcp4", secRP+":443")
		return err
	})
	s1 := &http.Server{Handler: mux}
	s2 := &http.Server{Handler: mux, TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}}}
	go s1.Serve(plain)
	go s2.ServeTLS(secure, "", "")
	ctl := http.NewServeMux()
	ctl.HandleFunc("GET /token", func(w http.ResponseWriter, r *http.Request) {
		rp.mu.Lock()
		tok, ok := rp.tokens[r.URL.Query().Get("sandbox")]
		rp.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte(tok))
	})
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s3 := &http.Server{Handler: ctl}
	go s3.Serve(ln)
	t.Cleanup(func() { s1.Close(); s2.Close(); s3.Close() })
	return "http://" + ln.Addr().String()
}

// TestSecretsInRequests runs js/secrets_egress.mjs with the npm e2b
// client in the egress test's world (egress_test.go) plus a relying party:
// secrets put into requests by the egress proxy, and workload tokens
// verified against the daemon's OIDC discovery and JWKS.
func TestSecretsInRequests(t *testing.T) {
	dir := jsDir(t)
	setupEgressOutside(t)
	egrNames[secRPName] = secRP
	t.Cleanup(func() { delete(egrNames, secRPName) })
	seen, socks, worldCA := startEgressWorld(t)
	control := startControl(t, seen, socks)
	rpCert, rpCA := egressCert(t)
	dnsAddr := startEgressDNS(t)
	d := startDaemon(t, "--egress-dns", dnsAddr, "--egress-ca-file", writeCAFile(t, worldCA+rpCA))
	rp := &relyingParty{issuer: d.URL, tokens: map[string]string{}}
	rpControl := rp.start(t, rpCert)
	// The relying party finds the issuer where the daemon says it is.
	p, err := oidc.NewProvider(context.Background(), d.URL)
	if err != nil {
		t.Fatalf("the daemon is no OIDC issuer at %s: %v", d.URL, err)
	}
	if p.Endpoint().AuthURL != "" {
		t.Errorf("discovery names an authorization endpoint forkbox does not have: %+v", p.Endpoint())
	}
	env := append(clientEnv(d),
		"EGRESS_WEB_A="+egrWebA, "EGRESS_WEB_B="+egrWebB, "EGRESS_CONTROL="+control,
		"SECRETS_RP="+secRP, "SECRETS_RP_CONTROL="+rpControl)
	runNode(t, dir, env, "--test", "--test-concurrency=1", "--test-reporter=spec", "secrets_egress.mjs")
	if ids := d.SandboxIDs(); len(ids) > 0 {
		t.Errorf("secrets_egress.mjs left sandboxes behind: %v", ids)
		d.KillAll()
	}
	for _, f := range []string{"forkbox.db", "forkbox.db-wal"} {
		if b, _ := os.ReadFile(filepath.Join(d.DataDir, f)); strings.Contains(string(b), "sk-one-") || strings.Contains(string(b), "sk-two-") {
			t.Errorf("%s holds a secret value in the clear", f)
		}
	}
	if strings.Contains(d.Log(), "sk-one-") || strings.Contains(d.Log(), "sk-two-") {
		t.Error("the daemon's log carries a secret value")
	}
}
