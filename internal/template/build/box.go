package build

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/forkbox/forkbox/client"
	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/runtime"
)

// agentPort is the agent's envd port inside every sandbox.
const agentPort = 49983

// box is one sandbox a build runs commands in, reached through the runtime
// (not registered with the sandbox manager: a daemon restart removes it as
// an orphan).
type box struct {
	rt   runtime.Runtime
	id   string
	conn *client.SandboxConn
	hc   *http.Client
}

// startBox creates a sandbox from spec (its ID is filled in) and waits for
// its agent, handing it init (envd's /init body).
func startBox(ctx context.Context, rt runtime.Runtime, spec runtime.Spec, init map[string]any) (*box, error) {
	spec.ID = runtime.NewID()
	if spec.Hostname == "" {
		spec.Hostname = "forkbox"
	}
	spec.Env = append(spec.Env, "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
	spec.AllowInternet = true
	if _, err := rt.Create(ctx, spec); err != nil {
		return nil, fmt.Errorf("build sandbox: %w", err)
	}
	b := &box{rt: rt, id: spec.ID}
	b.hc = &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return rt.Dial(ctx, b.id, agentPort)
		},
		DisableCompression: true,
		// No idle connection may be captured in a template's image: the
		// restored network stack would still believe in it.
		DisableKeepAlives: true,
	}}
	base := fmt.Sprintf("http://%s:%d", b.id, agentPort)
	b.conn = client.New(base, "", client.WithHTTPClient(b.hc)).Conn(b.id, "")
	if err := b.init(ctx, base, init); err != nil {
		b.close(ctx)
		return nil, err
	}
	return b, nil
}

// init posts /init until the agent answers.
func (b *box) init(ctx context.Context, base string, body map[string]any) error {
	if body == nil {
		body = map[string]any{}
	}
	body["timestamp"] = time.Now().UTC().Format(time.RFC3339Nano)
	data, _ := json.Marshal(body)
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/init", bytes.NewReader(data))
		req.Header.Set("Content-Type", "application/json")
		resp, err := b.hc.Do(req)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode/100 == 2 {
				return nil
			}
			err = fmt.Errorf("agent /init: %s", resp.Status)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("agent of build sandbox %s did not answer: %v: %w", b.id, err, errdefs.ErrUnavailable)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// exec runs argv as user, streaming output lines to out; it returns the
// exit code.
func (b *box) exec(ctx context.Context, o client.ExecOptions, out func(string)) (int, error) {
	w := &lineWriter{emit: out}
	o.Stdout, o.Stderr = w, w
	code, err := b.conn.Exec(ctx, o)
	w.flush()
	return code, err
}

func (b *box) close(ctx context.Context) {
	b.rt.Delete(context.WithoutCancel(ctx), b.id)
	b.hc.CloseIdleConnections()
}

// lineWriter turns a byte stream into lines.
type lineWriter struct {
	mu   sync.Mutex
	buf  []byte
	emit func(string)
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		w.line(string(w.buf[:i]))
		w.buf = w.buf[i+1:]
	}
	if len(w.buf) > 64<<10 {
		w.line(string(w.buf))
		w.buf = nil
	}
	return len(p), nil
}

func (w *lineWriter) line(s string) {
	s = strings.TrimRight(s, "\r")
	if w.emit != nil {
		w.emit(s)
	}
}

func (w *lineWriter) flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.buf) > 0 {
		w.line(string(w.buf))
		w.buf = nil
	}
}
