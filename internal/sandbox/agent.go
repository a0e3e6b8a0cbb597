package sandbox

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/store"
)

// Transport returns an http.RoundTripper for the data plane: a request for
// http://<sandboxID>:<port>/path reaches that port inside the sandbox
// through Manager.Dial (so a paused auto-resume sandbox wakes up, and one
// that is not running is refused), whatever the backend's network looks
// like. Connections are pooled per sandbox and port. Requests to the agent's
// port pass the agent gate (gate.go) when the Manager has one.
func (m *Manager) Transport() http.RoundTripper {
	return &gatedTransport{rt: newTransport(m.Dial, true), gate: m.gate, port: strconv.Itoa(m.cfg.AgentPort)}
}

// DataPlaneHost is the host:port to put in a Transport request for port of
// sandbox id. It names the sandbox's current incarnation: after a resume or
// rollback the pooled connections of the previous one must not be reused —
// the restored network stack still believes in them, and requests on them
// hang — so the new incarnation gets a new pool key.
func (m *Manager) DataPlaneHost(id string, port int) string {
	m.mu.Lock()
	gen := 0
	if e, ok := m.boxes[id]; ok {
		gen = e.gen
	}
	m.mu.Unlock()
	return net.JoinHostPort(fmt.Sprintf("%s.%d", id, gen), strconv.Itoa(port))
}

// newTransport builds a transport whose connections come from dial;
// the manager's own calls to agents dial the runtime directly because they
// happen while the sandbox is still being created or resumed.
func newTransport(dial func(ctx context.Context, id string, port int) (net.Conn, error), keepAlive bool) *http.Transport {
	return &http.Transport{
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
			host, portStr, err := net.SplitHostPort(addr)
			if err != nil {
				return nil, err
			}
			host, _, _ = strings.Cut(host, ".") // drop the incarnation
			port, err := strconv.Atoi(portStr)
			if err != nil {
				return nil, fmt.Errorf("bad port %q: %w", portStr, errdefs.ErrInvalidArgument)
			}
			return dial(ctx, host, port)
		},
		// A port listed in a sandbox's httpsPorts is reached over TLS
		// (an https URL); its certificate is not verified, as on E2B:
		// the hop is inside the host, and sandboxes serve self-signed ones.
		TLSClientConfig:     &tls.Config{InsecureSkipVerify: true},
		MaxIdleConnsPerHost: 16,
		// Our own calls (/init, /health) are rare: no pooled connections that
		// could outlive the sandbox incarnation they were made to.
		DisableKeepAlives: !keepAlive,
		IdleConnTimeout:   30 * time.Second,
		// Streams (process output, watchers) are long-lived: no overall
		// timeout here, the caller's context bounds each request.
		ResponseHeaderTimeout: 0,
		DisableCompression:    true,
	}
}

// agentURL is the Transport URL of a path on a sandbox's agent.
func (m *Manager) agentURL(id, path string) string {
	return fmt.Sprintf("http://%s:%d%s", id, m.cfg.AgentPort, path)
}

// initBody is envd's /init request.
type initBody struct {
	EnvVars map[string]string `json:"envVars,omitempty"`
	// AccessToken is always sent: an empty one clears the token a restored
	// image carried over from its source.
	AccessToken    string    `json:"accessToken"`
	Timestamp      time.Time `json:"timestamp"`
	DefaultUser    string    `json:"defaultUser,omitempty"`
	DefaultWorkdir string    `json:"defaultWorkdir,omitempty"`
	// CPUCount is forkbox's: the agent pins what it starts to that many
	// CPUs, since gVisor shows a restored sandbox its image's count.
	CPUCount int `json:"cpuCount,omitempty"`
	// EgressCA is forkbox's: the PEM of the egress proxy's CA, which the
	// agent adds to the system trust store (once: a restored image that
	// has it skips the work).
	EgressCA string `json:"egressCA,omitempty"`
	// Volumes is forkbox's: the links that make each volume appear at its
	// path (volumeLinks).
	Volumes []volumeLink `json:"forkboxVolumes,omitempty"`
	// CommandPool is forkbox's: how many login shells the agent keeps
	// ready for commands.run; always sent, so 0 turns a pool off.
	CommandPool int `json:"commandPool"`
}

// initAgent waits for the sandbox's agent to answer, then hands it the
// sandbox's env vars and access token. oldToken is the token the agent
// already holds (a restored image remembers its source's): /init must carry
// it to be accepted. Retries are quick: the agent is normally up within a
// few tens of milliseconds of the sandbox starting.
func (m *Manager) initAgent(ctx context.Context, rec *store.Sandbox, oldToken string) error {
	ctx, cancel := context.WithTimeout(ctx, m.cfg.AgentWait)
	defer cancel()
	body, _ := json.Marshal(initBody{
		EnvVars: rec.EnvVars, AccessToken: rec.EnvdAccessToken, Timestamp: m.now().UTC(),
		CPUCount: rec.CPUCount, EgressCA: string(m.cfg.EgressCA), Volumes: volumeLinks(rec.Volumes),
		CommandPool: m.cfg.CommandPool,
	})
	delay := 2 * time.Millisecond
	for {
		err := m.postInit(ctx, rec.ID, body, oldToken)
		if err == nil || errors.Is(err, errdefs.ErrInvalidArgument) {
			return err // refused for good (a volume path): no retry helps
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("agent of %s did not answer: %v: %w", rec.ID, err, errdefs.ErrUnavailable)
		case <-time.After(delay):
		}
		delay = min(delay*2, 50*time.Millisecond)
	}
}

// warmPooled has the agent of pooled sandbox id start and reap one
// process (agent POST /forkbox/warm) before a create takes it, so the
// create's first command does not pay for mapping the spawn path again
// after the restore. Best effort: an agent without the route (a user
// template's older agent) or a failure only costs that first command
// its speed.
func (m *Manager) warmPooled(ctx context.Context, id string) {
	ctx, cancel := context.WithTimeout(ctx, m.cfg.AgentWait)
	defer cancel()
	start := m.now()
	for delay := 2 * time.Millisecond; ; delay = min(delay*2, 50*time.Millisecond) {
		resp, err := m.agentRequest(ctx, http.MethodPost, id, "/forkbox/warm", "", nil)
		if err == nil {
			resp.Body.Close()
			m.log.Debug("pool: sandbox warmed", "sandbox", id, "status", resp.StatusCode, "took", m.now().Sub(start))
			return
		}
		select {
		case <-ctx.Done():
			m.log.Warn("pool: cannot warm sandbox", "sandbox", id, "err", err)
			return
		case <-time.After(delay):
		}
	}
}

func (m *Manager) postInit(ctx context.Context, id string, body []byte, token string) error {
	resp, err := m.agentRequest(ctx, http.MethodPost, id, "/init", token, bytes.NewReader(body))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode == http.StatusUnprocessableEntity {
		return fmt.Errorf("agent /init: %s: %w", strings.TrimSpace(string(msg)), errdefs.ErrInvalidArgument)
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("agent /init: %s", resp.Status)
	}
	return nil
}

// agentRequest sends method path (a JSON body, when not nil) to sandbox
// id's agent, with its access token when it has one. The caller closes
// the response's body.
func (m *Manager) agentRequest(ctx context.Context, method, id, path, token string, body io.Reader) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, m.agentURL(id, path), body)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("X-Access-Token", token)
	}
	return m.agentHTTP.Do(req)
}

// agentGet GETs path from sandbox id's agent, with its access token when it
// has one, and decodes the JSON answer into out.
func (m *Manager) agentGet(ctx context.Context, id, token, path string, out any) error {
	resp, err := m.agentRequest(ctx, http.MethodGet, id, path, token, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("agent %s: %s", path, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("agent %s: %w", path, err)
	}
	return nil
}
