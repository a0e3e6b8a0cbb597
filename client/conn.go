package client

import (
	"encoding/base64"
	"net/http"

	"connectrpc.com/connect"

	"github.com/forkbox/forkbox/api/gen/filesystem/filesystemconnect"
	"github.com/forkbox/forkbox/api/gen/process/processconnect"
)

// EnvdPort is the port of the agent (envd) inside every sandbox.
const EnvdPort = "49983"

// Data-plane routing headers understood by the daemon's proxy (the same ones
// the E2B SDKs send when E2B_SANDBOX_URL is set).
const (
	headerSandboxID   = "E2b-Sandbox-Id"
	headerSandboxPort = "E2b-Sandbox-Port"
	headerAccessToken = "X-Access-Token"
)

// SandboxConn talks to the agent inside one sandbox through the daemon's
// data-plane proxy: commands (Exec) and files. It is safe for concurrent use
// and cheap to create; it holds no connection of its own.
type SandboxConn struct {
	id    string
	user  string
	base  string
	hc    *http.Client
	proc  processconnect.ProcessClient
	files filesystemconnect.FilesystemClient
}

// Conn returns a data-plane connection to sandbox id. accessToken is the
// sandbox's envdAccessToken (required for secure sandboxes, else may be
// empty).
func (c *Client) Conn(id, accessToken string) *SandboxConn {
	rt := c.hc.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	hc := *c.hc
	hc.Transport = &routeTransport{base: rt, id: id, token: accessToken}
	return newConn(id, "", c.sandboxURL, &hc)
}

func newConn(id, user, base string, hc *http.Client) *SandboxConn {
	// JSON over the Connect protocol is what envd's own clients speak, and it
	// works over plain HTTP/1.1 for unary and server-streaming calls.
	opts := []connect.ClientOption{connect.WithProtoJSON()}
	s := &SandboxConn{id: id, user: user, base: base, hc: hc}
	s.proc = processconnect.NewProcessClient(hc, base, opts...)
	s.files = filesystemconnect.NewFilesystemClient(hc, base, opts...)
	return s
}

// ID returns the sandbox id.
func (s *SandboxConn) ID() string { return s.id }

// WithUser returns a copy of s whose commands and file operations run as
// user (for example "root"). The default is the sandbox's default user.
func (s *SandboxConn) WithUser(user string) *SandboxConn {
	return newConn(s.id, user, s.base, s.hc)
}

// setUser sets the envd user header: HTTP Basic auth with the user name and
// an empty password, as the E2B SDKs send it.
func setUser(h http.Header, user string) {
	if user == "" {
		return
	}
	h.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(user+":")))
}

// routeTransport adds the headers that make the daemon's proxy route a
// request to the sandbox's agent.
type routeTransport struct {
	base  http.RoundTripper
	id    string
	token string
}

// RoundTrip implements http.RoundTripper.
func (t *routeTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	// A RoundTripper must not modify the caller's request.
	r := req.Clone(req.Context())
	r.Header.Set(headerSandboxID, t.id)
	r.Header.Set(headerSandboxPort, EnvdPort)
	if t.token != "" {
		r.Header.Set(headerAccessToken, t.token)
	}
	return t.base.RoundTrip(r)
}
