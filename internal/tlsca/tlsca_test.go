package tlsca

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestLoadOrCreateGeneratesOnceAndReloads(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tls")
	ca, err := LoadOrCreate(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !ca.Cert.IsCA {
		t.Fatal("generated certificate is not a CA")
	}
	pub, ok := ca.Cert.PublicKey.(*ecdsa.PublicKey)
	if !ok || pub.Curve != elliptic.P256() {
		t.Fatalf("CA key is %T, want ECDSA P-256", ca.Cert.PublicKey)
	}
	if life := ca.Cert.NotAfter.Sub(ca.Cert.NotBefore); life < CAValidity {
		t.Fatalf("CA valid for %s, want at least %s", life, CAValidity)
	}
	if ca.CertPath != filepath.Join(dir, CertFile) {
		t.Fatalf("CertPath = %q", ca.CertPath)
	}
	fi, err := os.Stat(filepath.Join(dir, KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	if mode := fi.Mode().Perm(); mode != 0o600 {
		t.Fatalf("key file mode %o, want 600", mode)
	}
	again, err := LoadOrCreate(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again.Cert.Raw, ca.Cert.Raw) {
		t.Fatal("second LoadOrCreate generated a new CA instead of loading the stored one")
	}
}

func TestLoadOrCreateRejectsGarbage(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{CertFile, KeyFile} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("not pem"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := LoadOrCreate(dir); err == nil {
		t.Fatal("LoadOrCreate accepted garbage files")
	}
}

func TestIssueVerifiesForHosts(t *testing.T) {
	ca, err := LoadOrCreate(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := ca.Issue(Hosts("forkbox.test"))
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	tests := []struct {
		name string
		ok   bool
	}{
		{"8000-abc123.forkbox.test", true},
		{"forkbox.test", true},
		{"localhost", true},
		{"127.0.0.1", true},
		{"a.b.forkbox.test", false}, // wildcards cover one label
		{"example.com", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := leaf.Leaf.Verify(x509.VerifyOptions{
				DNSName: tt.name, Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
			})
			if (err == nil) != tt.ok {
				t.Fatalf("verify %s: err=%v, want ok=%v", tt.name, err, tt.ok)
			}
		})
	}
	if leaf.Leaf.NotAfter.After(time.Now().Add(LeafValidity)) {
		t.Fatalf("leaf valid until %s, longer than %s", leaf.Leaf.NotAfter, LeafValidity)
	}
	if _, err := ca.Issue(nil); err == nil {
		t.Fatal("Issue with no hosts succeeded")
	}
}

func TestHosts(t *testing.T) {
	tests := []struct {
		domain string
		want   []string
	}{
		{"", []string{"localhost", "127.0.0.1"}},
		{"forkbox.test", []string{"*.forkbox.test", "forkbox.test", "localhost", "127.0.0.1"}},
	}
	for _, tt := range tests {
		got := Hosts(tt.domain)
		if len(got) != len(tt.want) {
			t.Fatalf("Hosts(%q) = %v, want %v", tt.domain, got, tt.want)
		}
		for i := range got {
			if got[i] != tt.want[i] {
				t.Fatalf("Hosts(%q) = %v, want %v", tt.domain, got, tt.want)
			}
		}
	}
}

// TestServeTLS serves HTTPS with an issued leaf and fetches through it
// with only the CA file trusted, as a client given SSL_CERT_FILE would.
func TestServeTLS(t *testing.T) {
	ca, err := LoadOrCreate(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := ca.Issue(Hosts("forkbox.test"))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello "+r.Host)
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{leaf}}
	srv.StartTLS()
	defer srv.Close()

	pemBytes, err := os.ReadFile(ca.CertPath)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pemBytes) {
		t.Fatal("ca.pem holds no certificate")
	}
	addr := srv.Listener.Addr().String()
	client := &http.Client{Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: roots},
		// 8000-abc.forkbox.test resolves to the test server.
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		},
	}}
	resp, err := client.Get("https://8000-abc.forkbox.test/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if string(body) != "hello 8000-abc.forkbox.test" {
		t.Fatalf("body %q", body)
	}
	if _, err := client.Get("https://other.example/"); err == nil {
		t.Fatal("a name outside the certificate was accepted")
	}
}

func TestLoadKeyPair(t *testing.T) {
	ca, err := LoadOrCreate(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := ca.Issue([]string{"example.test"})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certPath, keyPath := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	keyDER, err := x509.MarshalPKCS8PrivateKey(leaf.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	if err := writePEM(certPath, "CERTIFICATE", leaf.Certificate[0], 0o644); err != nil {
		t.Fatal(err)
	}
	if err := writePEM(keyPath, "PRIVATE KEY", keyDER, 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := LoadKeyPair(certPath, keyPath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Certificate[0], leaf.Certificate[0]) {
		t.Fatal("loaded certificate differs")
	}
	if _, err := LoadKeyPair(filepath.Join(dir, "missing.pem"), keyPath); err == nil {
		t.Fatal("LoadKeyPair of a missing file succeeded")
	}
}
