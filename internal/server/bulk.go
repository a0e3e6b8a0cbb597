package server

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"syscall"
)

// netConner is implemented by connection wrappers (the manager's tracked
// data-plane connections) that can hand out the connection they wrap.
type netConner interface{ NetConn() net.Conn }

// hopHeaders are the hop-by-hop headers a proxy must not forward.
var hopHeaders = []string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

// serveGet forwards a plain HTTP/1.1 GET for an ordinary port of a sandbox
// (not envd, not the code interpreter, not an httpsPorts one) over a
// connection of its own, so the
// response body can go from the sandbox's socket to the client's with
// splice, never through user space: downloads from servers in sandboxes
// are the bulk of the port proxy's bytes, and on small machines the copy
// loop of the reverse proxy cost a quarter of the throughput. It reports
// false when the request is not such a GET (the caller proxies it).
func (d *dataPlane) serveGet(w http.ResponseWriter, r *http.Request, t target) bool {
	if r.Method != http.MethodGet || t.port == d.s.cfg.EnvdPort || t.port == CodeInterpreterPort || t.https ||
		r.ProtoMajor != 1 || r.Header.Get("Upgrade") != "" || r.ContentLength != 0 || len(r.TransferEncoding) > 0 {
		return false
	}
	r = r.WithContext(withTarget(r, t))
	if t.host != "" {
		r.Host = t.host // r is WithContext's copy
	}
	up, err := d.s.mgr.Dial(r.Context(), t.id, t.port)
	if err != nil {
		d.proxyError(w, r, err)
		return true
	}
	defer up.Close()
	// A client that goes away must not leave the copy waiting on a quiet
	// sandbox.
	defer context.AfterFunc(r.Context(), func() { up.Close() })()
	raw := up
	if nc, ok := up.(netConner); ok {
		raw = nc.NetConn()
	}
	resp, br, err := sendGet(r, raw)
	if err != nil {
		d.proxyError(w, r, err)
		return true
	}
	copyHeader(w.Header(), resp.Header)
	if resp.ContentLength >= 0 {
		w.Header().Set("Content-Length", itoa(resp.ContentLength))
	}
	w.WriteHeader(resp.StatusCode)
	if resp.ContentLength > 0 {
		spliceBody(w, br, raw, resp.ContentLength)
		return true
	}
	streamBody(w, resp.Body)
	return true
}

// sendGet writes r on conn, asking the sandbox's server to close after
// one response, and reads the response's header.
func sendGet(r *http.Request, conn net.Conn) (*http.Response, *bufio.Reader, error) {
	out := r.Clone(r.Context())
	out.Body = http.NoBody
	stripRouting(out.Header)
	for _, h := range hopHeaders {
		out.Header.Del(h)
	}
	out.Close = true
	if err := out.Write(conn); err != nil {
		return nil, nil, err
	}
	br := bufio.NewReaderSize(conn, 32<<10)
	resp, err := http.ReadResponse(br, out)
	return resp, br, err
}

// spliceLowat is how much of a body the sandbox's socket gathers before
// the splice loop is woken. Servers in sandboxes send in small bursts
// (gVisor's network stack); waking for each cost the daemon a goroutine
// switch and two splice calls per ~20 KiB, measured at 170 ms of CPU per
// 100 MiB, CPU the sandbox then lacks on a small machine.
const spliceLowat = 256 << 10

// spliceBody sends n body bytes: those already read with the header, then
// the rest straight from the socket through the server connection's
// ReadFrom, which splices between two TCP sockets. All but the last
// spliceLowat bytes are moved with the socket's receive low-water mark
// raised, so every wake-up moves at least that much; the rest with it at
// one byte, so the tail cannot wait for bytes that will never come.
func spliceBody(w http.ResponseWriter, br *bufio.Reader, conn net.Conn, n int64) {
	head, _ := br.Peek(int(min(int64(br.Buffered()), n)))
	if _, err := w.Write(head); err != nil {
		return
	}
	rest := n - int64(len(head))
	tcp, isTCP := conn.(*net.TCPConn)
	if isTCP && rest > 2*spliceLowat && setLowat(tcp, spliceLowat) == nil {
		bulk := rest - spliceLowat
		m, err := copyTo(w, io.LimitReader(conn, bulk))
		setLowat(tcp, 1)
		if err != nil || m < bulk {
			return
		}
		rest -= m
	}
	copyTo(w, io.LimitReader(conn, rest))
}

// copyTo copies r to w with w's ReadFrom when it has one (the server
// connection's, which splices), else io.Copy.
func copyTo(w http.ResponseWriter, r io.Reader) (int64, error) {
	if rf, ok := unwrapWriter(w).(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(w, r)
}

// setLowat sets the receive low-water mark (SO_RCVLOWAT) of c.
func setLowat(c *net.TCPConn, n int) error {
	raw, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	err = raw.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVLOWAT, n)
	})
	return errors.Join(err, serr)
}

// streamBody copies a body of unknown length, flushing every read so
// event streams reach the client as they are produced.
func streamBody(w http.ResponseWriter, body io.Reader) {
	rc := http.NewResponseController(w)
	buf := copyBuffers{}.Get()
	defer copyBuffers{}.Put(buf)
	for {
		n, err := body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			rc.Flush()
		}
		if err != nil {
			return
		}
	}
}

// unwrapWriter peels middleware wrappers off w (their Unwrap method).
func unwrapWriter(w http.ResponseWriter) http.ResponseWriter {
	for {
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			return w
		}
		w = u.Unwrap()
	}
}

func copyHeader(dst, src http.Header) {
	for k, vs := range src {
		dst[k] = append(dst[k][:0:0], vs...)
	}
	for _, h := range hopHeaders {
		dst.Del(h)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
