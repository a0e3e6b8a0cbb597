package daemon

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"

	"github.com/forkbox/forkbox/internal/server"
	"github.com/forkbox/forkbox/internal/tlsca"
)

// tlsFront is the optional second listener (--tls-listen): the same
// handler as the plain one, over TLS, so SDKs that build
// https://<port>-<id>.<domain> URLs reach the data plane.
type tlsFront struct {
	ln     net.Listener
	hs     *http.Server
	caPath string // the generated CA to trust; "" with --tls-cert
	// deferred: the certificate is issued by certify, after start-up
	// fetched the cluster's CA.
	deferred bool
}

// listenTLS opens o.TLSListen with its certificate; serving starts later
// (start). It returns nil, nil when TLS is not configured.
func listenTLS(o Options) (*tlsFront, error) {
	if o.TLSListen == "" {
		if o.TLSCert != "" || o.TLSKey != "" {
			return nil, errors.New("--tls-cert and --tls-key need --tls-listen")
		}
		return nil, nil
	}
	// With --database the CA is the cluster's, which the data dir holds
	// only once prepareData wrote it there: certify issues the leaf then.
	deferred := o.Database != "" && o.TLSCert == "" && o.TLSKey == ""
	var certs []tls.Certificate
	var caPath string
	if !deferred {
		cert, path, err := tlsCertificate(o)
		if err != nil {
			return nil, err
		}
		certs, caPath = []tls.Certificate{cert}, path
	}
	ln, err := net.Listen("tcp", o.TLSListen)
	if err != nil {
		return nil, fmt.Errorf("tls listen: %w", err)
	}
	hs := server.NewHTTPServer(nil, o.Logger)
	hs.TLSConfig = &tls.Config{Certificates: certs, MinVersion: tls.VersionTLS12}
	return &tlsFront{ln: ln, hs: hs, caPath: caPath, deferred: deferred}, nil
}

// certify issues the deferred leaf (see listenTLS); a nil f, or one with
// its certificate, has nothing to do.
func (f *tlsFront) certify(o Options) error {
	if f == nil || !f.deferred {
		return nil
	}
	cert, caPath, err := tlsCertificate(o)
	if err != nil {
		return err
	}
	f.hs.TLSConfig.Certificates, f.caPath, f.deferred = []tls.Certificate{cert}, caPath, false
	return nil
}

// start serves h on the TLS listener, sending the end of serving to errc;
// a nil f serves nothing.
func (f *tlsFront) start(o Options, h http.Handler, errc chan<- error) {
	if f == nil {
		return
	}
	f.hs.Handler = h
	go func() { errc <- f.hs.ServeTLS(f.ln, "", "") }()
	o.Logger.Info("forkbox serving tls", "addr", f.ln.Addr().String(), "domain", o.Domain)
}

// close releases a listener that never served; a nil f has none.
func (f *tlsFront) close() {
	if f != nil {
		f.ln.Close()
	}
}

// tlsCertificate returns the certificate of the TLS listener: the files
// named by --tls-cert/--tls-key, else a leaf for tlsca.Hosts(o.Domain)
// issued at each start by the CA kept in <data-dir>/tls (generated on
// first start), whose path is returned for clients to trust.
func tlsCertificate(o Options) (tls.Certificate, string, error) {
	if o.TLSCert != "" || o.TLSKey != "" {
		if o.TLSCert == "" || o.TLSKey == "" {
			return tls.Certificate{}, "", errors.New("--tls-cert and --tls-key go together")
		}
		cert, err := tlsca.LoadKeyPair(o.TLSCert, o.TLSKey)
		return cert, "", err
	}
	ca, err := tlsca.LoadOrCreate(filepath.Join(o.DataDir, "tls"))
	if err != nil {
		return tls.Certificate{}, "", err
	}
	cert, err := ca.Issue(tlsca.Hosts(o.Domain))
	if err != nil {
		return tls.Certificate{}, "", err
	}
	return cert, ca.CertPath, nil
}

// shutdown stops the TLS listener; a nil f has nothing to stop.
func (f *tlsFront) shutdown(ctx context.Context) error {
	if f == nil {
		return nil
	}
	if err := f.hs.Shutdown(ctx); err != nil {
		return fmt.Errorf("tls listener shutdown: %w", err)
	}
	return nil
}

// printBanner tells where TLS is served and how to trust its CA.
func (f *tlsFront) printBanner(w io.Writer, domain string) {
	if f == nil {
		return
	}
	names := "localhost"
	if domain != "" {
		names = "*." + domain
	}
	fmt.Fprintf(w, "TLS: serving https on %s for %s\n", f.ln.Addr(), names)
	if f.caPath == "" {
		fmt.Fprintf(w, "  (certificate from --tls-cert)\n\n")
		return
	}
	fmt.Fprintf(w, "Its certificate is issued by a local CA: %s\nTrust it in the client's shell:\n", f.caPath)
	fmt.Fprintf(w, "  export NODE_EXTRA_CA_CERTS=%s\n", f.caPath)
	fmt.Fprintf(w, "  export SSL_CERT_FILE=%s   # Python/OpenSSL: replaces the system roots\n\n", f.caPath)
}
