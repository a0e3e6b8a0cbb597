package daemon

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/forkbox/forkbox/internal/tlsca"
)

func TestTLSCertificateOptions(t *testing.T) {
	dir := t.TempDir()
	certPath, keyPath := writeLeaf(t, dir)
	tests := []struct {
		name      string
		o         Options
		wantErr   string
		wantCA    bool
		wantNames []string
	}{
		{name: "generated CA", o: Options{DataDir: dir, Domain: "forkbox.test"}, wantCA: true,
			wantNames: []string{"*.forkbox.test", "forkbox.test", "localhost"}},
		{name: "from flags", o: Options{DataDir: dir, TLSCert: certPath, TLSKey: keyPath},
			wantNames: []string{"flags.test"}},
		{name: "cert without key", o: Options{DataDir: dir, TLSCert: certPath}, wantErr: "go together"},
		{name: "missing file", o: Options{DataDir: dir, TLSCert: certPath + ".x", TLSKey: keyPath}, wantErr: "load tls certificate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cert, caPath, err := tlsCertificate(tt.o)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (caPath != "") != tt.wantCA {
				t.Fatalf("caPath = %q, want a CA: %v", caPath, tt.wantCA)
			}
			leaf, err := x509.ParseCertificate(cert.Certificate[0])
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(leaf.DNSNames, ",") != strings.Join(tt.wantNames, ",") {
				t.Fatalf("DNS names %v, want %v", leaf.DNSNames, tt.wantNames)
			}
		})
	}
}

func TestStartTLSNeedsListenForCert(t *testing.T) {
	f, err := listenTLS(Options{TLSCert: "c.pem", TLSKey: "k.pem", Logger: slog.Default()})
	if err == nil || f != nil {
		t.Fatalf("listenTLS with --tls-cert but no --tls-listen: %v, %v", f, err)
	}
	if f, err := listenTLS(Options{}); f != nil || err != nil {
		t.Fatalf("listenTLS without TLS settings: %v, %v", f, err)
	}
}

// TestStartTLSServes serves a handler on the TLS listener and reaches it
// as 8000-abc.forkbox.test with only the generated CA trusted.
func TestStartTLSServes(t *testing.T) {
	dir := t.TempDir()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, r.Host) })
	errc := make(chan error, 1)
	o := Options{DataDir: dir, Domain: "forkbox.test", TLSListen: "127.0.0.1:0", Logger: slog.Default()}
	f, err := listenTLS(o)
	if err != nil {
		t.Fatal(err)
	}
	f.start(o, h, errc)
	defer f.shutdown(context.Background())
	var banner bytes.Buffer
	f.printBanner(&banner, o.Domain)
	ca := filepath.Join(dir, "tls", tlsca.CertFile)
	for _, want := range []string{"NODE_EXTRA_CA_CERTS=" + ca, "SSL_CERT_FILE=" + ca, "*.forkbox.test"} {
		if !strings.Contains(banner.String(), want) {
			t.Errorf("banner lacks %q:\n%s", want, banner.String())
		}
	}
	pemBytes, err := os.ReadFile(ca)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pemBytes)
	addr := f.ln.Addr().String()
	tr := &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: roots},
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		},
	}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Get("https://8000-abc.forkbox.test/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "8000-abc.forkbox.test" {
		t.Fatalf("body %q", body)
	}
	if err := f.shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		t.Fatalf("serve ended with %v, want ErrServerClosed", err)
	}
}

// writeLeaf writes a certificate for flags.test and its key as PEM files.
func writeLeaf(t *testing.T, dir string) (certPath, keyPath string) {
	t.Helper()
	ca, err := tlsca.LoadOrCreate(filepath.Join(t.TempDir(), "other-ca"))
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := ca.Issue([]string{"flags.test"})
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(leaf.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	certPath, keyPath = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	var chain []byte
	for _, der := range leaf.Certificate {
		chain = append(chain, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
	}
	if err := os.WriteFile(certPath, chain, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certPath, keyPath
}
