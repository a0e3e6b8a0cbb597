package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/forkbox/forkbox/client"
)

// codeInterpreterTemplate is the daemon's code-interpreter template (the
// E2B code-interpreter SDK's default); its sandboxes serve the interpreter
// on codeInterpreterPort.
const (
	codeInterpreterTemplate = "code-interpreter-v1"
	codeInterpreterPort     = "49999"
)

// interp talks to one sandbox's code interpreter through the daemon's data
// plane, as the E2B code-interpreter SDK's runCode does.
type interp struct {
	hc    *http.Client
	url   string // <sandbox URL>/execute
	id    string
	token string // envdAccessToken, if any
	lang  string // the cells' language; "" is the SDK's default (Python)
}

func (b *fbBench) interp(sb *client.Sandbox) *interp {
	return &interp{hc: interpHTTP, url: b.c.SandboxURL() + "/execute", id: sb.SandboxID, token: sb.EnvdAccessToken}
}

// interpHTTP keeps connections to the daemon alive between calls, as the
// SDK's HTTP client does.
var interpHTTP = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4, IdleConnTimeout: time.Minute}}

// execEvent is the part of an /execute stream line the bench looks at.
type execEvent struct {
	Type  string `json:"type"`
	Text  string `json:"text"`
	Name  string `json:"name"`
	Value string `json:"value"`
}

// httpStatusError is a non-200 answer of /execute.
type httpStatusError struct {
	status int
	body   string
}

func (e *httpStatusError) Error() string {
	return fmt.Sprintf("/execute: HTTP %d: %s", e.status, strings.TrimSpace(e.body))
}

// runCode executes code in the default context of in.lang and returns
// once end_of_execution arrived. It fails unless a result event with text
// want came before it (want "" takes any or none).
func (in *interp) runCode(ctx context.Context, code, want string) error {
	req, err := in.request(ctx, code)
	if err != nil {
		return err
	}
	resp, err := in.hc.Do(req)
	if err != nil {
		return err
	}
	defer func() {
		// Read the (already ended) stream to EOF so the connection is reused.
		io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
	}()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return &httpStatusError{resp.StatusCode, string(msg)}
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	var results []string
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var ev execEvent
		if err := json.Unmarshal(line, &ev); err != nil {
			return fmt.Errorf("/execute: bad event %q: %v", line, err)
		}
		switch ev.Type {
		case "result":
			results = append(results, ev.Text)
		case "error":
			return fmt.Errorf("/execute: %s: %s", ev.Name, ev.Value)
		case "end_of_execution":
			if want == "" {
				return nil
			}
			for _, r := range results {
				if r == want {
					return nil
				}
			}
			return fmt.Errorf("/execute of %q: results %q, want %q", code, results, want)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("/execute stream: %w", err)
	}
	return fmt.Errorf("/execute stream ended without end_of_execution")
}

// request is the SDK's /execute request for code in in.lang.
func (in *interp) request(ctx context.Context, code string) (*http.Request, error) {
	fields := map[string]string{"code": code}
	if in.lang != "" {
		fields["language"] = in.lang
	}
	body, _ := json.Marshal(fields)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, in.url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("E2b-Sandbox-Id", in.id)
	req.Header.Set("E2b-Sandbox-Port", codeInterpreterPort)
	if in.token != "" {
		req.Header.Set("X-Access-Token", in.token)
	}
	return req, nil
}

// runCodeUntil retries runCode while the data plane cannot reach the
// interpreter yet (connection error or a 502/503/504 from the proxy), for
// at most 30 s, and returns how many attempts failed.
func (in *interp) runCodeUntil(ctx context.Context, code, want string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for retries := 0; ; retries++ {
		err := in.runCode(ctx, code, want)
		if err == nil || !retryable(err) {
			return retries, err
		}
		select {
		case <-ctx.Done():
			return retries, fmt.Errorf("interpreter not reachable: %w", err)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func retryable(err error) bool {
	var se *httpStatusError
	if errors.As(err, &se) {
		return se.status == http.StatusBadGateway || se.status == http.StatusServiceUnavailable ||
			se.status == http.StatusGatewayTimeout
	}
	return !strings.HasPrefix(err.Error(), "/execute") // transport-level error
}

func (b *fbBench) createInterp(ctx context.Context) (*client.Sandbox, error) {
	// Exactly the SDK's request body: {"templateID":"code-interpreter-v1"}.
	return b.c.CreateSandbox(ctx, client.CreateOptions{TemplateID: codeInterpreterTemplate})
}

// benchCodeInterp measures the runCode round trip, create → first runCode
// and the idle memory of interpreter sandboxes.
func (b *fbBench) benchCodeInterp(ctx context.Context) {
	b.codeInterpRTT(ctx)
	b.codeInterpFirst(ctx)
	b.codeInterpMemory(ctx)
	b.codeInterpLanguages(ctx)
}

// codeInterpRTT: runCode('1+1') round trips on one warm sandbox.
func (b *fbBench) codeInterpRTT(ctx context.Context) {
	sb, err := b.createInterp(ctx)
	if err != nil {
		b.fail(err, "codeinterp.rtt")
		return
	}
	defer b.kill(ctx, sb.SandboxID)
	in := b.interp(sb)
	if _, err := in.runCodeUntil(ctx, "1+1", "2"); err != nil {
		b.fail(err, "codeinterp.rtt")
		return
	}
	var rtt samples
	for i := range b.cfg.echoN + 3 {
		t0 := time.Now()
		if err := in.runCode(ctx, "1+1", "2"); err != nil {
			b.fail(err, "codeinterp.rtt")
			return
		}
		if i >= 3 {
			rtt.addDur(time.Since(t0))
		}
	}
	b.res.Set("codeinterp.rtt", b.side, rtt)
}

// codeInterpFirst: create, then the first runCode until its end.
func (b *fbBench) codeInterpFirst(ctx context.Context) {
	var total, create samples
	retried := 0
	for i := range b.cfg.n + 1 { // iteration 0 warms caches and is dropped
		t0 := time.Now()
		sb, err := b.createInterp(ctx)
		if err != nil {
			b.fail(err, "codeinterp.first", "codeinterp.create")
			return
		}
		t1 := time.Now()
		retries, err := b.interp(sb).runCodeUntil(ctx, "x = 1\nx + 1", "2")
		t2 := time.Now()
		b.kill(ctx, sb.SandboxID)
		if err != nil {
			b.fail(err, "codeinterp.first")
			return
		}
		slog.Info("forkbox first runCode", "i", i, "total", t2.Sub(t0), "create", t1.Sub(t0), "retries", retries)
		if i > 0 {
			total.addDur(t2.Sub(t0))
			create.addDur(t1.Sub(t0))
			if retries > 0 {
				retried++
			}
		}
	}
	var each []string
	for _, v := range total {
		each = append(each, fmt.Sprintf("%.0f", v))
	}
	b.res.Note("codeinterp", "%screate → first runCode, every timed iteration in order (ms): %s. The create call is a "+
		"hand-over when the daemon has a pre-restored sandbox of the template ready (`serve --pool-size`), else a restore.",
		b.who(), strings.Join(each, ", "))
	b.res.Set("codeinterp.first", b.side, total)
	b.res.Set("codeinterp.create", b.side, create)
	if retried > 0 {
		b.res.Note("codeinterp", "%sIn %d of %d first-runCode iterations the first `/execute` did not reach the interpreter "+
			"(connection error or HTTP 502/503/504) and was retried every 5 ms; the retries are in the time.", b.who(), retried, len(total))
	}
}

// codeInterpMemory: memoryConcurrent interpreter sandboxes idle together
// for 2 s after one runCode each, measured like the memory section.
func (b *fbBench) codeInterpMemory(ctx context.Context) {
	b.idleMemory(ctx, "codeinterp.memory", func(ctx context.Context) (*client.Sandbox, error) {
		sb, err := b.createInterp(ctx)
		if err == nil {
			_, err = b.interp(sb).runCodeUntil(ctx, "1+1", "2")
		}
		return sb, err
	})
}
