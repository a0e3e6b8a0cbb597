package egress

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/forkbox/forkbox/internal/netpolicy"
)

// Issuer issues server certificates (tlsca.CA does, with the egress CA):
// the certificates the proxy shows sandboxes on intercepted connections.
type Issuer interface {
	Issue(hosts []string) (tls.Certificate, error)
}

// intercept serves a TLS connection whose SNI has a transform: the proxy
// completes the sandbox's handshake with a certificate for sni from the
// egress CA (which the sandbox trusts), offering only HTTP/1.1; meanwhile
// it connects upstream and verifies the server as any client would
// (system roots plus Config.RootCAs), so a sandbox cannot make the proxy
// send its headers to a server that does not hold sni's certificate. No
// request goes upstream before the first one's Host is judged (it must be
// sni). hello is the ClientHello already read.
func (p *Proxy) intercept(ctx context.Context, cn *conn, sni string, hello []byte, d decision) {
	cert, err := p.leaves.get(sni)
	if err != nil {
		p.log.Warn("egress: cannot issue an interception certificate", "name", sni, "err", err)
		return
	}
	hctx, cancel := context.WithTimeout(ctx, peekTimeout)
	defer cancel()
	upc := make(chan upstream, 1)
	go func() { upc <- p.dialTLS(hctx, cn, d, sni) }()
	var up upstream
	received := false
	defer func() {
		if !received {
			cancel() // the dial ends with hctx
			up = <-upc
		}
		if up.conn != nil {
			up.conn.Close()
		}
	}()
	raw := &replayConn{Conn: cn.c, r: io.MultiReader(bytes.NewReader(hello), cn.br)}
	client := tls.Server(raw, &tls.Config{
		Certificates: []tls.Certificate{*cert}, NextProtos: []string{"http/1.1"}, MinVersion: tls.VersionTLS12,
	})
	if err := client.HandshakeContext(hctx); err != nil {
		p.log.Debug("egress: sandbox's TLS handshake failed", "name", sni, "err", err)
		return
	}
	br := bufio.NewReaderSize(client, 16<<10)
	req, err := http.ReadRequest(br)
	if err != nil {
		return
	}
	if !p.sameHost(cn, req, sni) {
		writeStatus(client, http.StatusMisdirectedRequest, "forkbox egress: Host "+req.Host+" is not the TLS server name "+sni)
		return
	}
	up, received = <-upc, true
	if up.err != nil {
		p.log.Info("egress upstream unreachable", "dst", d.to, "name", sni, "err", up.err)
		writeStatus(client, http.StatusBadGateway, "forkbox egress: "+sni+": "+up.err.Error())
		return
	}
	p.allowed.Add(1)
	cn.c.SetReadDeadline(time.Time{})
	p.exchange(cn, client, br, req, up.conn, sni)
}

// upstream is an intercepted connection's verified server side.
type upstream struct {
	conn *tls.Conn
	err  error
}

// dialTLS connects to d's destination and completes a verified TLS
// handshake for sni, offering HTTP/1.1 only.
func (p *Proxy) dialTLS(ctx context.Context, cn *conn, d decision, sni string) upstream {
	c, err := p.dialFor(ctx, cn, d)
	if err != nil {
		return upstream{err: err}
	}
	tc := tls.Client(c, &tls.Config{ServerName: sni, RootCAs: p.cfg.RootCAs, NextProtos: []string{"http/1.1"}, MinVersion: tls.VersionTLS12})
	if err := tc.HandshakeContext(ctx); err != nil {
		c.Close()
		return upstream{err: err}
	}
	return upstream{conn: tc}
}

// sameHost reports whether req, read on a connection judged for host,
// names host (an absent Host is taken as host); otherwise the denial is
// counted. A Host other than the SNI is the domain-fronting trick: the
// headers of one name sent under another's certificate.
func (p *Proxy) sameHost(cn *conn, req *http.Request, host string) bool {
	if req.Host == "" {
		req.Host = host
	}
	if normalName(req.Host) == host {
		return true
	}
	p.deny(cn.src, cn.dst, req.Host, decision{reason: netpolicy.ReasonHostSwitch,
		why: "Host " + req.Host + " on a connection for " + host})
	return false
}

// replayConn reads what was already consumed (the ClientHello) before
// the rest of the connection.
type replayConn struct {
	net.Conn
	r io.Reader
}

func (c *replayConn) Read(b []byte) (int, error) { return c.r.Read(b) }

// leafCache keeps one certificate per intercepted name: issuing costs an
// ECDSA key and signature (~0.1 ms), a handshake should not.
type leafCache struct {
	ca Issuer
	mu sync.Mutex
	m  map[string]*tls.Certificate // guarded by mu
}

// maxLeaves bounds the cache: a sandbox reaching many names of a wildcard
// rule could otherwise grow it without end.
const maxLeaves = 4096

func (l *leafCache) get(name string) (*tls.Certificate, error) {
	l.mu.Lock()
	c, ok := l.m[name]
	l.mu.Unlock()
	if ok && time.Until(c.Leaf.NotAfter) > time.Hour {
		return c, nil
	}
	cert, err := l.ca.Issue([]string{name})
	if err != nil {
		return nil, err
	}
	if cert.Leaf == nil {
		if cert.Leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, err
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil || len(l.m) >= maxLeaves {
		l.m = map[string]*tls.Certificate{}
	}
	l.m[name] = &cert
	return &cert, nil
}
