package egress

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// errHelloRead stops the TLS handshake once the ClientHello is parsed.
var errHelloRead = errors.New("client hello read")

// handleTLS reads the SNI of the ClientHello with crypto/tls's own parser
// (GetConfigForClient sees the parsed hello; the handshake stops there).
// A name with a transform is intercepted (see intercept); any other
// connection is replayed to the upstream byte for byte: the TLS session is
// the sandbox's and the server's, end to end.
func (p *Proxy) handleTLS(ctx context.Context, cn *conn) {
	rec := &recordingReader{r: cn.br}
	var sni string
	srv := tls.Server(readOnlyConn{Conn: cn.c, r: rec}, &tls.Config{
		GetConfigForClient: func(hi *tls.ClientHelloInfo) (*tls.Config, error) {
			sni = hi.ServerName
			return nil, errHelloRead
		},
	})
	err := srv.HandshakeContext(ctx)
	if !errors.Is(err, errHelloRead) {
		// Not a ClientHello crypto/tls can parse: no name to judge by.
		sni = ""
	}
	d := p.decide(ctx, cn, sni)
	if d.deny {
		p.deny(cn.src, cn.dst, sni, d)
		return
	}
	if _, _, ok := cn.policy.TransformFor(sni); ok && p.leaves != nil {
		p.intercept(ctx, cn, normalName(sni), rec.buf.Bytes(), d)
		return
	}
	up, err := p.dialFor(ctx, cn, d)
	if err != nil {
		p.log.Info("egress upstream unreachable", "dst", d.to, "name", sni, "err", err)
		return
	}
	defer up.Close()
	p.allowed.Add(1)
	cn.c.SetReadDeadline(time.Time{})
	if _, err := up.Write(rec.buf.Bytes()); err != nil {
		return
	}
	relay(cn.c, cn.br, up)
}

// handleHTTP judges a plain connection by the Host of its first request
// and every later request on it: a request naming another host ends the
// connection (keep-alive cannot smuggle a second, unjudged host).
func (p *Proxy) handleHTTP(ctx context.Context, cn *conn) {
	req, err := http.ReadRequest(cn.br)
	if err != nil {
		// Not HTTP: judged by address alone, replaying what was peeked.
		p.relayRaw(ctx, cn)
		return
	}
	host := req.Host
	d := p.decide(ctx, cn, host)
	if d.deny {
		p.deny(cn.src, cn.dst, host, d)
		forbid(cn.c, host, d.why)
		return
	}
	up, err := p.dialFor(ctx, cn, d)
	if err != nil {
		p.log.Info("egress upstream unreachable", "dst", d.to, "name", host, "err", err)
		writeStatus(cn.c, http.StatusBadGateway, "forkbox egress: "+host+" unreachable")
		return
	}
	defer up.Close()
	p.allowed.Add(1)
	cn.c.SetReadDeadline(time.Time{})
	p.exchange(cn, cn.c, cn.br, req, up, normalName(host))
}

// exchange relays one judged HTTP/1.1 connection: the responses go back
// as bytes; the requests, read from br, go upstream one by one.
func (p *Proxy) exchange(cn *conn, client net.Conn, br *bufio.Reader, req *http.Request, up net.Conn, host string) {
	done := make(chan struct{})
	go func() {
		io.Copy(client, up)
		closeWrite(client)
		close(done)
	}()
	p.forwardRequests(cn, client, br, req, up, host)
	closeWrite(up)
	<-done
}

// forwardRequests writes req and the requests after it upstream, each with
// host's transform applied (the rules' headers replace the sandbox's),
// until the client stops, switches protocols or names another host, or a
// placeholder cannot be filled in (the client then gets a 502: HTTP/1.1
// without pipelining sends a request once the previous answer is in, so
// nothing else is writing to it).
func (p *Proxy) forwardRequests(cn *conn, client net.Conn, br *bufio.Reader, req *http.Request, up net.Conn, host string) {
	_, headers, _ := cn.policy.TransformFor(host)
	for {
		if err := p.setHeaders(req, cn, client, host, headers); err != nil {
			return
		}
		if _, ok := req.Header["User-Agent"]; !ok {
			req.Header["User-Agent"] = []string{""} // Write would add Go's
		}
		if err := req.Write(up); err != nil {
			return
		}
		if strings.EqualFold(req.Header.Get("Connection"), "upgrade") {
			io.Copy(up, br) // a WebSocket: no more requests to judge
			return
		}
		next, err := http.ReadRequest(br)
		if err != nil || !p.sameHost(cn, next, host) {
			return
		}
		req = next
	}
}

// relayRaw passes a connection judged by its address alone.
func (p *Proxy) relayRaw(ctx context.Context, cn *conn) {
	d := p.decide(ctx, cn, "")
	if d.deny {
		p.deny(cn.src, cn.dst, "", d)
		return
	}
	up, err := p.dialFor(ctx, cn, d)
	if err != nil {
		p.log.Info("egress upstream unreachable", "dst", d.to, "err", err)
		return
	}
	defer up.Close()
	p.allowed.Add(1)
	cn.c.SetReadDeadline(time.Time{})
	relay(cn.c, cn.br, up)
}

// relay copies both ways until both sides are done; client reads go
// through br, which holds what was peeked.
func relay(client net.Conn, br io.Reader, up net.Conn) {
	done := make(chan struct{})
	go func() {
		io.Copy(client, up)
		closeWrite(client)
		close(done)
	}()
	io.Copy(up, br)
	closeWrite(up)
	<-done
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	}
}

// forbid answers a refused plain-HTTP request with a 403 naming the rule.
func forbid(c net.Conn, host, why string) {
	writeStatus(c, http.StatusForbidden, fmt.Sprintf("forkbox egress: %s is not allowed (%s)", host, why))
}

func writeStatus(c net.Conn, code int, msg string) {
	c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s\n",
		code, http.StatusText(code), len(msg)+1, msg)
}

// recordingReader keeps a copy of what is read through it.
type recordingReader struct {
	r   io.Reader
	buf bytes.Buffer
}

func (r *recordingReader) Read(b []byte) (int, error) {
	n, err := r.r.Read(b)
	r.buf.Write(b[:n])
	return n, err
}

// readOnlyConn lets crypto/tls read the ClientHello but never write: the
// sandbox must not see a server handshake from the proxy.
type readOnlyConn struct {
	net.Conn
	r io.Reader
}

func (c readOnlyConn) Read(b []byte) (int, error)  { return c.r.Read(b) }
func (c readOnlyConn) Write(b []byte) (int, error) { return 0, io.ErrClosedPipe }
func (c readOnlyConn) Close() error                { return nil }

// originalDst reads the destination a redirected connection had before
// the NAT (conntrack's SO_ORIGINAL_DST).
func originalDst(c net.Conn) (netip.AddrPort, error) {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return netip.AddrPort{}, fmt.Errorf("not a TCP connection: %T", c)
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return netip.AddrPort{}, err
	}
	var out netip.AddrPort
	var serr error
	err = raw.Control(func(fd uintptr) {
		mreq, err := unix.GetsockoptIPv6Mreq(int(fd), unix.IPPROTO_IP, unix.SO_ORIGINAL_DST)
		if err != nil {
			serr = err
			return
		}
		b := mreq.Multiaddr // a struct sockaddr_in: family, port, address
		port := uint16(b[2])<<8 | uint16(b[3])
		out = netip.AddrPortFrom(netip.AddrFrom4([4]byte{b[4], b[5], b[6], b[7]}), port)
	})
	if err == nil {
		err = serr
	}
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("SO_ORIGINAL_DST: %w", err)
	}
	return out, nil
}
