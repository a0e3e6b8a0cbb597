// Package tlsca gives forkbox's data plane a TLS certificate for
// *.<domain>: either one loaded from files, or a leaf issued by a local
// certificate authority that is generated once (on first start) and kept in
// the data directory, so clients can trust it once and for all.
package tlsca

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// File names of the CA under its directory.
const (
	CertFile = "ca.pem"
	KeyFile  = "ca-key.pem"
)

// Validity periods of the generated certificates.
const (
	CAValidity   = 10 * 365 * 24 * time.Hour
	LeafValidity = 397 * 24 * time.Hour // the longest clients accept
)

// CA is a local certificate authority.
type CA struct {
	// CertPath is the PEM file of the CA certificate: the file clients
	// must trust (NODE_EXTRA_CA_CERTS, SSL_CERT_FILE, ...).
	CertPath string
	Cert     *x509.Certificate
	key      crypto.Signer
}

// LoadOrCreate loads the data plane's CA kept in dir (ca.pem, ca-key.pem),
// generating it first when dir holds none. The key file is written with
// mode 0600.
func LoadOrCreate(dir string) (*CA, error) {
	host, _ := os.Hostname()
	return LoadOrCreateCA(dir, "forkbox local CA "+host)
}

// LoadOrCreateCA is LoadOrCreate for a CA named name (its subject's
// common name when generated): each of the daemon's CAs has its own
// directory and name, so a trust store holding two tells them apart.
func LoadOrCreateCA(dir, name string) (*CA, error) {
	certPath, keyPath := filepath.Join(dir, CertFile), filepath.Join(dir, KeyFile)
	ca, err := load(certPath, keyPath)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return ca, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("tls ca dir: %w", err)
	}
	ca, err = generate(certPath, name)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(ca.key)
	if err != nil {
		return nil, fmt.Errorf("encode ca key: %w", err)
	}
	// The key first: a crash in between leaves no certificate without key.
	if err := writePEM(keyPath, "PRIVATE KEY", keyDER, 0o600); err != nil {
		return nil, err
	}
	if err := writePEM(certPath, "CERTIFICATE", ca.Cert.Raw, 0o644); err != nil {
		return nil, err
	}
	return ca, nil
}

// generate makes a new ECDSA P-256 CA certificate valid for CAValidity.
func generate(certPath, name string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate ca key: %w", err)
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{Organization: []string{"forkbox"}, CommonName: name},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(CAValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("create ca certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parse ca certificate: %w", err)
	}
	return &CA{CertPath: certPath, Cert: cert, key: key}, nil
}

// load reads a CA from its PEM files; a missing file is fs.ErrNotExist.
func load(certPath, keyPath string) (*CA, error) {
	pair, err := tls.LoadX509KeyPair(certPath, keyPath)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		return nil, fmt.Errorf("load tls ca %s: %w", certPath, err)
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("parse tls ca %s: %w", certPath, err)
	}
	key, ok := pair.PrivateKey.(crypto.Signer)
	if !ok || !cert.IsCA {
		return nil, fmt.Errorf("tls ca %s: not a CA certificate with a signing key", certPath)
	}
	return &CA{CertPath: certPath, Cert: cert, key: key}, nil
}

// Issue returns a new server certificate signed by ca, valid for
// LeafValidity, for every name in hosts (DNS names, wildcards such as
// "*.forkbox.test", or IP addresses). Its chain includes the CA.
func (ca *CA) Issue(hosts []string) (tls.Certificate, error) {
	if len(hosts) == 0 {
		return tls.Certificate{}, errors.New("issue tls certificate: no host names")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("generate leaf key: %w", err)
	}
	serial, err := randomSerial()
	if err != nil {
		return tls.Certificate{}, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{Organization: []string{"forkbox"}, CommonName: hosts[0]},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     minTime(now.Add(LeafValidity), ca.Cert.NotAfter),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.key)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("create leaf certificate: %w", err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("parse leaf certificate: %w", err)
	}
	return tls.Certificate{Certificate: [][]byte{der, ca.Cert.Raw}, PrivateKey: key, Leaf: leaf}, nil
}

// Hosts lists the names a daemon's certificate covers for domain:
// *.<domain> and <domain> (when set), localhost and 127.0.0.1.
func Hosts(domain string) []string {
	var hosts []string
	if domain != "" {
		hosts = append(hosts, "*."+domain, domain)
	}
	return append(hosts, "localhost", "127.0.0.1")
}

// LoadKeyPair loads a certificate chain and key from PEM files (flags).
func LoadKeyPair(certPath, keyPath string) (tls.Certificate, error) {
	pair, err := tls.LoadX509KeyPair(certPath, keyPath)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("load tls certificate %s: %w", certPath, err)
	}
	return pair, nil
}

func randomSerial() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("certificate serial: %w", err)
	}
	return n, nil
}

func writePEM(path, typ string, der []byte, mode os.FileMode) error {
	data := pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, mode); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Chmod(tmp, mode); err != nil { // umask-proof
		return fmt.Errorf("chmod %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
