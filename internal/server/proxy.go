package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"path"
	"strconv"
	"strings"
	"sync"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/sandbox"
)

// Routing headers the E2B SDKs send with every data-plane request when
// E2B_SANDBOX_URL is set; they are stripped before forwarding.
const (
	SandboxIDHeader   = "E2b-Sandbox-Id"
	SandboxPortHeader = "E2b-Sandbox-Port"
)

// routingHeaders are the (id, port) header pairs of the SDKs we serve:
// E2B's, and Novita's fork of it, which renamed them.
var routingHeaders = [][2]string{
	{SandboxIDHeader, SandboxPortHeader},
	{"Novita-Sandbox-Id", "Novita-Sandbox-Port"},
}

// target is where a data-plane request goes.
type target struct {
	id   string
	port int // 0: the envd port
	// host replaces the request's Host (the sandbox's maskRequestHost),
	// and https reaches the port over TLS (its httpsPorts); set by serve.
	host  string
	https bool
}

// dataPlaneTarget tells whether r is for the data plane and where it goes:
// by the E2b-Sandbox-Id / E2b-Sandbox-Port headers, else by a Host of the
// form <port>-<sandboxID>.<domain>. A data-plane request with a malformed
// port has ok set and an ErrInvalidArgument.
func dataPlaneTarget(r *http.Request) (t target, ok bool, err error) {
	for _, hp := range routingHeaders {
		id := strings.TrimSpace(r.Header.Get(hp[0]))
		if id == "" {
			continue
		}
		t.id = id
		if p := strings.TrimSpace(r.Header.Get(hp[1])); p != "" {
			n, perr := strconv.Atoi(p)
			if perr != nil || n < 1 || n > 65535 {
				return t, true, fmt.Errorf("bad %s %q: %w", hp[1], p, errdefs.ErrInvalidArgument)
			}
			t.port = n
		}
		return t, true, nil
	}
	t, ok = hostTarget(r.Host)
	return t, ok, nil
}

// hostTarget parses a Host of the form <port>-<sandboxID>.<anything>.
func hostTarget(host string) (target, bool) {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	label, rest, found := strings.Cut(host, ".")
	if !found || rest == "" {
		return target{}, false
	}
	portStr, id, found := strings.Cut(strings.ToLower(label), "-")
	if !found || id == "" || !isAlnum(id) {
		return target{}, false
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 1 || port > 65535 || portStr[0] == '0' {
		return target{}, false
	}
	return target{id: id, port: port}, true
}

func isAlnum(s string) bool {
	for _, c := range s {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// dataPlane forwards requests into sandboxes.
type dataPlane struct {
	s  *Server
	rp *httputil.ReverseProxy
}

type targetKey struct{}

func newDataPlane(s *Server) *dataPlane {
	d := &dataPlane{s: s}
	d.rp = &httputil.ReverseProxy{
		Rewrite: d.rewrite,
		// Dials through Manager.Dial: sandboxes that are not running are
		// refused (ErrConflict), paused auto-resume ones are resumed.
		Transport: s.mgr.Transport(),
		// Stream every write at once: process output, watchers and code
		// execution results are long-lived streams.
		FlushInterval: -1,
		ErrorHandler:  d.proxyError,
		// Bulk downloads through the port proxy spend their time in copy
		// loops; 128 KiB buffers (pooled, so only streams copying right now
		// hold one) take a quarter of the syscalls of the default 32 KiB.
		BufferPool: copyBuffers{},
	}
	return d
}

// copyBuffers is the proxy's pool of copy buffers.
type copyBuffers struct{}

var copyBufferPool = sync.Pool{New: func() any { b := make([]byte, 128<<10); return &b }}

func (copyBuffers) Get() []byte  { return *copyBufferPool.Get().(*[]byte) }
func (copyBuffers) Put(b []byte) { copyBufferPool.Put(&b) }

// serve checks that t may be reached and forwards r to it.
func (d *dataPlane) serve(w http.ResponseWriter, r *http.Request, t target) {
	if t.port == 0 {
		t.port = d.s.cfg.EnvdPort
	}
	if t.port == d.s.cfg.EnvdPort && isInitPath(r) {
		writeStatus(w, http.StatusForbidden, "the agent's /init is not reachable from outside the sandbox")
		return
	}
	sb, err := d.s.mgr.Get(r.Context(), t.id)
	if err != nil {
		d.fail(w, t, err)
		return
	}
	if err := d.s.checkTrafficToken(r, sb, t.port); err != nil {
		writeError(w, err)
		return
	}
	t.host, t.https = sb.Inbound.Host(t.port), sb.Inbound.IsHTTPS(t.port)
	if err := reachable(sb); err != nil {
		if !wakesOnTraffic(sb) {
			d.fail(w, t, err)
			return
		}
		// Auto-resume: traffic for a paused sandbox resumes it (waiting
		// for a pause in flight); the request then goes through.
		if _, _, err := d.s.mgr.Connect(r.Context(), t.id, 0); err != nil {
			d.failResume(w, t, err)
			return
		}
	}
	if d.serveGet(w, r, t) {
		return
	}
	// Client-streaming calls over HTTP/1.1 read the body while answering.
	http.NewResponseController(w).EnableFullDuplex()
	// A full-duplex handler must not return with the body unread: the
	// server's next-request read would race its background read and panic
	// (golang/go#68560) — as when the sandbox is dead and the round trip
	// fails before the body is sent.
	defer r.Body.Close()
	d.rp.ServeHTTP(w, r.WithContext(withTarget(r, t)))
}

// withTarget returns r's context carrying t for rewrite and proxyError.
func withTarget(r *http.Request, t target) context.Context {
	return context.WithValue(r.Context(), targetKey{}, t)
}

// stripRouting removes the headers that only route a request to a sandbox.
func stripRouting(h http.Header) {
	for _, hp := range routingHeaders {
		h.Del(hp[0])
		h.Del(hp[1])
	}
	h.Del(TrafficTokenHeader)
}

// wakesOnTraffic reports whether data-plane traffic resumes sb: it was
// created with auto-resume and is paused or being paused or resumed.
func wakesOnTraffic(sb *sandbox.Sandbox) bool {
	return sb.AutoResume && sb.State.Public() == sandbox.PublicPaused && !sb.FilesOnly
}

// reachable answers whether the data plane may forward to sb now.
func reachable(sb *sandbox.Sandbox) error {
	switch sb.State {
	case sandbox.StateRunning, sandbox.StateSnapshotting:
		return nil
	case sandbox.StateKilling, sandbox.StateKilled:
		return fmt.Errorf("sandbox %s: %w", sb.ID, errdefs.ErrNotFound)
	case sandbox.StatePausing, sandbox.StatePaused:
		return pausedError(sb)
	default:
		return fmt.Errorf("sandbox %s is %s, not running: retry once it is running: %w",
			sb.ID, sb.State, errdefs.ErrConflict)
	}
}

// isInitPath reports whether r names the agent's /init, however spelled.
func isInitPath(r *http.Request) bool {
	for _, p := range []string{r.URL.Path, r.URL.RawPath, r.URL.EscapedPath()} {
		if p == "" {
			continue
		}
		if strings.EqualFold(strings.TrimSuffix(path.Clean("/"+p), "/"), "/init") {
			return true
		}
		if strings.Contains(strings.ToLower(p), "%2f") || strings.Contains(p, "\\") {
			return true // encoded separators: never legitimate towards envd's /init
		}
	}
	return false
}

// rewrite points the outgoing request at the sandbox's port.
func (d *dataPlane) rewrite(pr *httputil.ProxyRequest) {
	t, _ := pr.In.Context().Value(targetKey{}).(target)
	pr.Out.URL.Scheme = "http"
	if t.https {
		pr.Out.URL.Scheme = "https"
	}
	pr.Out.URL.Host = d.s.mgr.DataPlaneHost(t.id, t.port)
	pr.Out.Host = pr.In.Host
	if t.host != "" {
		pr.Out.Host = t.host
	}
	pr.SetXForwarded()
	stripRouting(pr.Out.Header)
}

// proxyError answers a failure to reach the sandbox (dial or round trip).
func (d *dataPlane) proxyError(w http.ResponseWriter, r *http.Request, err error) {
	t, _ := r.Context().Value(targetKey{}).(target)
	if r.Context().Err() != nil {
		d.s.log.Debug("data plane request cancelled", "sandbox", t.id, "port", t.port, "err", err)
		return
	}
	d.s.log.Info("data plane cannot reach sandbox", "sandbox", t.id, "port", t.port, "err", err)
	if errors.Is(err, errdefs.ErrConflict) {
		// Manager.Dial: paused (or being paused) since serve looked.
		err = fmt.Errorf("sandbox %s is not running (it is paused or being paused): resume it (connect) before using it: %w %w",
			t.id, errPaused, errdefs.ErrConflict)
	}
	d.fail(w, t, err)
}

// failResume answers an auto-resume that did not succeed.
func (d *dataPlane) failResume(w http.ResponseWriter, t target, err error) {
	d.s.log.Info("data plane could not resume sandbox", "sandbox", t.id, "err", err)
	switch {
	case errors.Is(err, errdefs.ErrNotFound), errors.Is(err, errdefs.ErrConflict):
		d.fail(w, t, err)
	default:
		status, msg := httpStatus(err), "sandbox "+t.id+" could not be resumed"
		if status == http.StatusInternalServerError {
			status = http.StatusServiceUnavailable
		} else {
			msg += ": " + err.Error()
		}
		writeStatus(w, status, msg)
	}
}

// notFoundBody is E2B's data-plane answer for a sandbox that is gone.
type notFoundBody struct {
	Message   string `json:"message"`
	SandboxID string `json:"sandboxId"`
	Code      int    `json:"code"`
}

// portClosedBody answers a port nothing listens on.
type portClosedBody struct {
	Message   string `json:"message"`
	SandboxID string `json:"sandboxId"`
	Port      int    `json:"port"`
	Code      int    `json:"code"`
}

// fail answers a data-plane error: a gone or paused sandbox is a 502 with
// E2B's body, one that is otherwise not running a 409, a dial failure a 502.
func (d *dataPlane) fail(w http.ResponseWriter, t target, err error) {
	switch {
	case errors.Is(err, errPaused):
		writePaused(w, t.id, false)
	case errors.Is(err, errdefs.ErrNotFound):
		writeJSON(w, http.StatusBadGateway, notFoundBody{
			Message: "The sandbox was not found", SandboxID: t.id, Code: http.StatusBadGateway,
		})
	case errors.Is(err, errdefs.ErrConflict), errors.Is(err, errdefs.ErrInvalidArgument):
		writeError(w, err)
	default:
		writeJSON(w, http.StatusBadGateway, portClosedBody{
			Message:   fmt.Sprintf("The sandbox is running but port %d is not reachable", t.port),
			SandboxID: t.id, Port: t.port, Code: http.StatusBadGateway,
		})
	}
}
