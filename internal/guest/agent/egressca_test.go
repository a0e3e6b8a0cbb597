package agent

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func testCAPEM(t testing.TB, name string) []byte {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tpl, tpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// debianRoot is a file system with Debian's bundle (its last line lacking
// a newline) and Alpine's cert.pem linking to it.
func debianRoot(t testing.TB) (root, bundle string) {
	t.Helper()
	root = t.TempDir()
	bundle = filepath.Join(root, "etc/ssl/certs/ca-certificates.crt")
	if err := os.MkdirAll(filepath.Dir(bundle), 0o755); err != nil {
		t.Fatal(err)
	}
	system := strings.TrimSuffix(string(testCAPEM(t, "system")), "\n")
	if err := os.WriteFile(bundle, []byte(system), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("certs/ca-certificates.crt", filepath.Join(root, "etc/ssl/cert.pem")); err != nil {
		t.Fatal(err)
	}
	return root, bundle
}

// A PEM bundle parses only if every certificate in it does: this is what
// OpenSSL and Go load.
func bundleCerts(t *testing.T, path string) []string {
	t.Helper()
	b, _ := os.ReadFile(path)
	var names []string
	for {
		var blk *pem.Block
		if blk, b = pem.Decode(b); blk == nil {
			return names
		}
		if c, err := x509.ParseCertificate(blk.Bytes); err == nil {
			names = append(names, c.Subject.CommonName)
		} else {
			names = append(names, "?")
		}
	}
}

func TestInstallEgressCA(t *testing.T) {
	root, bundle := debianRoot(t)
	ca := testCAPEM(t, "egress one")
	for i := 0; i < 2; i++ { // the second time changes nothing
		ok, err := installEgressCA(root, ca)
		if err != nil || !ok {
			t.Fatalf("install #%d: %v %v", i, ok, err)
		}
	}
	if got := bundleCerts(t, bundle); strings.Join(got, ",") != "system,egress one" {
		t.Errorf("bundle holds %v, want the system's then the egress CA once", got)
	}
	if b, _ := os.ReadFile(filepath.Join(root, EgressCAPath)); string(b) != string(ca) {
		t.Errorf("%s = %q", EgressCAPath, b)
	}
	// Another daemon's CA (a snapshot restored elsewhere) is added too.
	if ok, err := installEgressCA(root, testCAPEM(t, "egress two")); err != nil || !ok {
		t.Fatal(ok, err)
	}
	if got := bundleCerts(t, bundle); strings.Join(got, ",") != "system,egress one,egress two" {
		t.Errorf("bundle holds %v", got)
	}
	bare := t.TempDir()
	if ok, err := installEgressCA(bare, ca); ok || err != nil {
		t.Errorf("an image without a bundle: %v %v", ok, err)
	}
	if _, err := os.Stat(filepath.Join(bare, EgressCAPath)); err == nil {
		t.Errorf("an image without a bundle was changed")
	}
	if _, err := installEgressCA(root, []byte("not pem")); err == nil {
		t.Errorf("garbage accepted")
	}
}

// /init installs the CA before answering, and processes started after it
// get NODE_EXTRA_CA_CERTS (Node.js does not read the system bundle).
func TestInitInstallsEgressCA(t *testing.T) {
	root, bundle := debianRoot(t)
	a := New(Config{TrustRoot: root})
	srv := httptest.NewServer(a.Handler())
	defer srv.Close()
	body, _ := json.Marshal(map[string]any{"egressCA": string(testCAPEM(t, "egress init"))})
	resp, err := http.Post(srv.URL+"/init", "application/json", strings.NewReader(string(body)))
	if err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("/init: %v %v", resp, err)
	}
	if got := bundleCerts(t, bundle); len(got) != 2 || got[1] != "egress init" {
		t.Errorf("bundle after /init: %v", got)
	}
	acct := &account{Name: "root", Home: "/root"}
	if env := a.processEnv(acct, nil, false); envValue(env, "NODE_EXTRA_CA_CERTS") != EgressCAPath {
		t.Errorf("process env lacks NODE_EXTRA_CA_CERTS: %v", env)
	}
	if env := New(Config{}).processEnv(acct, nil, false); envValue(env, "NODE_EXTRA_CA_CERTS") != "" {
		t.Errorf("NODE_EXTRA_CA_CERTS without a CA")
	}
}

// BenchmarkInstallEgressCA: the cost /init adds. "installed" is every
// restore of an image that already trusts the CA; "fresh" the first /init
// of a sandbox of an image that does not (appending to a 220 KB bundle).
func BenchmarkInstallEgressCA(b *testing.B) {
	ca := testCAPEM(b, "egress bench")
	b.Run("installed", func(b *testing.B) {
		root, _ := debianRoot(b)
		installEgressCA(root, ca)
		for b.Loop() {
			installEgressCA(root, ca)
		}
	})
	b.Run("fresh", func(b *testing.B) {
		root, bundle := debianRoot(b)
		big := make([]byte, 220<<10)
		for b.Loop() {
			b.StopTimer()
			os.WriteFile(bundle, big, 0o644)
			os.Remove(filepath.Join(root, EgressCAPath))
			b.StartTimer()
			installEgressCA(root, ca)
		}
	})
}

// The egress CA's variable is part of what a pooled shell starts with: the
// /init that turns it on makes the ready shells stale (a warm pool's
// sandbox, restored from an image without the CA, meets it at its first
// /init), and a later /init with the same CA changes nothing.
func TestSpawnViewFollowsEgressCA(t *testing.T) {
	root, _ := debianRoot(t)
	a := New(Config{TrustRoot: root, DefaultUser: "root"})
	srv := httptest.NewServer(a.Handler())
	defer srv.Close()
	body, _ := json.Marshal(map[string]any{"egressCA": string(testCAPEM(t, "egress view"))})
	post := func() {
		resp, err := http.Post(srv.URL+"/init", "application/json", strings.NewReader(string(body)))
		if err != nil || resp.StatusCode != http.StatusNoContent {
			t.Fatalf("/init: %v %v", resp, err)
		}
		resp.Body.Close()
	}
	before := a.spawnView()
	post()
	after := a.spawnView()
	if before == after {
		t.Fatalf("the view did not change when /init turned the egress CA on: %q", after)
	}
	post()
	if again := a.spawnView(); again != after {
		t.Fatalf("a second /init with the same CA changed the view:\n%q\n%q", after, again)
	}
}
