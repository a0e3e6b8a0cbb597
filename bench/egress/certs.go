package main

import (
	"crypto/tls"
	"crypto/x509"
	"os"

	"github.com/forkbox/forkbox/internal/tlsca"
)

// benchCAs are the outside server's CA (which the proxy's RootCAs and a
// client going end to end trust) and the egress CA (which a client whose
// HTTPS is intercepted trusts), both made by internal/tlsca.
type benchCAs struct {
	server                 tls.Certificate
	egress                 *tlsca.CA
	serverPool, egressPool *x509.CertPool
}

func newCAs() (*benchCAs, error) {
	dir, err := os.MkdirTemp("", "egress-bench-ca-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	srvCA, err := tlsca.LoadOrCreateCA(dir+"/server", "egress bench server CA")
	if err != nil {
		return nil, err
	}
	cert, err := srvCA.Issue([]string{name})
	if err != nil {
		return nil, err
	}
	egressCA, err := tlsca.LoadOrCreateCA(dir+"/egress", "egress bench egress CA")
	if err != nil {
		return nil, err
	}
	out := &benchCAs{server: cert, egress: egressCA, serverPool: x509.NewCertPool(), egressPool: x509.NewCertPool()}
	out.serverPool.AddCert(srvCA.Cert)
	out.egressPool.AddCert(egressCA.Cert)
	return out, nil
}
