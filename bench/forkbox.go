package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/forkbox/forkbox/client"
	"github.com/forkbox/forkbox/internal/daemon/daemonproc"
)

// fbBench measures forkbox through its Go SDK: REST control API and the
// data-plane proxy, exactly as a user's program would.
type fbBench struct {
	c   *client.Client
	d   *Daemon
	res *Results
	cfg config
	// side is where the code-interpreter measurements go: FB, or Raw's
	// columns for the previous build (-prev-bin) in the sections whose
	// second column is that build (sectionDef.vs).
	side Side
}

const sandboxTTL = 20 * time.Minute

func (b *fbBench) create(ctx context.Context) (*client.Sandbox, error) {
	return b.c.CreateSandbox(ctx, client.CreateOptions{TemplateID: "base", Timeout: sandboxTTL})
}

// measureHost measures the host memory of sandbox id's runsc container.
func (b *fbBench) measureHost(id string) (hostMem, error) {
	cid, err := daemonproc.ContainerOf(b.d.DataDir, id)
	if err != nil {
		return hostMem{}, err
	}
	return measureHost(cid)
}

func (b *fbBench) kill(ctx context.Context, id string) {
	if err := b.c.KillSandbox(context.WithoutCancel(ctx), id); err != nil && !client.IsNotFound(err) {
		slog.Warn("kill sandbox", "sandbox", id, "err", err)
	}
}

// firstWrite records when output first arrives.
type firstWrite struct {
	mu  sync.Mutex
	buf bytes.Buffer
	at  time.Time
}

func (w *firstWrite) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.at.IsZero() && len(p) > 0 {
		w.at = time.Now()
	}
	return w.buf.Write(p)
}

// echoArgv is `echo hi` in argv form, no shell; sdkEchoArgv is what the
// E2B SDKs send for commands.run("echo hi"): a bash login shell.
var (
	echoArgv    = []string{"/bin/echo", "hi"}
	sdkEchoArgv = []string{"/bin/bash", "-l", "-c", "echo hi"}
)

// echo runs `echo hi` (argv form) and returns when its output arrived.
func echo(ctx context.Context, conn *client.SandboxConn) (time.Time, error) {
	return echoWith(ctx, conn, echoArgv)
}

// echoWith runs argv, which must print "hi", and returns when the output
// arrived.
func echoWith(ctx context.Context, conn *client.SandboxConn, argv []string) (time.Time, error) {
	w := &firstWrite{}
	code, err := conn.Exec(ctx, client.ExecOptions{Cmd: argv, Stdout: w})
	if err != nil {
		return time.Time{}, err
	}
	if code != 0 || !strings.Contains(w.buf.String(), "hi") {
		return time.Time{}, fmt.Errorf("echo: exit %d, output %q", code, w.buf.String())
	}
	return w.at, nil
}

// echoUntil retries echo until it succeeds (a just-started sandbox's agent
// may need a moment) or 30 s pass, and returns when output first arrived.
func echoUntil(ctx context.Context, conn *client.SandboxConn) (time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		at, err := echo(ctx, conn)
		if err == nil {
			return at, nil
		}
		select {
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("no echo output: %w", err)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// unavailable words an error of a route that is not there (yet).
func unavailable(err error) (string, bool) {
	var e *client.Error
	if errors.As(err, &e) && (e.Status == 501 || e.Status == 404) {
		return fmt.Sprintf("not available (HTTP %d)", e.Status), true
	}
	return "", false
}

// fail records a failed measurement on the forkbox side of keys.
func (b *fbBench) fail(err error, keys ...string) {
	why, ok := unavailable(err)
	if !ok {
		why = "failed: " + shortErr(err)
	}
	slog.Error("forkbox measurement failed", "keys", keys, "err", err)
	for _, k := range keys {
		b.res.NA(k, b.side, why)
	}
}

func shortErr(err error) string {
	s := strings.ReplaceAll(err.Error(), "|", "/")
	if len(s) > 60 {
		s = s[:60] + "…"
	}
	return s
}

// benchCreate: CreateSandbox(base) then echo until its output arrives.
func (b *fbBench) benchCreate(ctx context.Context) {
	var total, api samples
	for i := range b.cfg.n + 1 { // iteration 0 warms caches and is dropped
		t0 := time.Now()
		sb, err := b.create(ctx)
		if err != nil {
			b.fail(err, "create.total", "create.api")
			return
		}
		t1 := time.Now()
		at, err := echoUntil(ctx, sb.Conn())
		b.kill(ctx, sb.SandboxID)
		if err != nil {
			b.fail(err, "create.total")
			return
		}
		slog.Info("forkbox create", "i", i, "total", at.Sub(t0), "create", t1.Sub(t0))
		if i > 0 {
			total.addDur(at.Sub(t0))
			api.addDur(t1.Sub(t0))
		}
	}
	b.res.Set("create.total", FB, total)
	b.res.Set("create.api", FB, api)
}

// benchEcho: echo round trips on one warm sandbox.
func (b *fbBench) benchEcho(ctx context.Context) {
	sb, err := b.create(ctx)
	if err != nil {
		b.fail(err, "echo.rtt")
		return
	}
	defer b.kill(ctx, sb.SandboxID)
	conn := sb.Conn()
	for _, m := range []struct {
		key  string
		argv []string
		gap  time.Duration
	}{{"echo.sdk", sdkEchoArgv, 0}, {"echo.sdk.paced", sdkEchoArgv, 100 * time.Millisecond}, {"echo.rtt", echoArgv, 0}} {
		var rtt samples
		for i := range b.cfg.echoN + 3 {
			time.Sleep(m.gap)
			t0 := time.Now()
			if _, err := echoWith(ctx, conn, m.argv); err != nil {
				b.fail(err, m.key)
				return
			}
			if i >= 3 { // the first calls open connections
				rtt.addDur(time.Since(t0))
			}
		}
		b.res.Set(m.key, FB, rtt)
	}
	var stat samples
	for range b.cfg.echoN {
		t0 := time.Now()
		if _, err := conn.Stat(ctx, "/"); err != nil {
			b.fail(err, "echo.stat")
			return
		}
		stat.addDur(time.Since(t0))
	}
	b.res.Set("echo.stat", FB, stat)
}

// benchMemory: memoryConcurrent sandboxes idle together for 2 s after
// create (and a first echo), measured from the host and by the daemon's
// metrics route.
func (b *fbBench) benchMemory(ctx context.Context) {
	b.idleMemory(ctx, "memory", func(ctx context.Context) (*client.Sandbox, error) {
		sb, err := b.create(ctx)
		if err == nil {
			_, err = echoUntil(ctx, sb.Conn())
		}
		return sb, err
	})
}

// idleMemory starts memoryConcurrent sandboxes with start (which brings
// one to its idle, warmed-up state), lets them idle together for 2 s and
// records the host's and the daemon's view in the rows <prefix>.host, …,
// <prefix>.daemon.
func (b *fbBench) idleMemory(ctx context.Context, prefix string, start func(context.Context) (*client.Sandbox, error)) {
	var sbs []*client.Sandbox
	defer func() {
		for _, sb := range sbs {
			b.kill(ctx, sb.SandboxID)
		}
	}()
	for range memoryConcurrent {
		sb, err := start(ctx)
		if sb != nil {
			sbs = append(sbs, sb)
		}
		if err != nil {
			b.fail(err, prefix+".host", prefix+".daemon")
			return
		}
	}
	time.Sleep(2 * time.Second)
	var ms memSamples
	var daemon samples
	for _, sb := range sbs {
		m, err := b.measureHost(sb.SandboxID)
		if err != nil {
			b.fail(err, prefix+".host")
			return
		}
		ms.add(m)
		if mt, err := b.c.Metrics(ctx, sb.SandboxID); err != nil {
			b.fail(err, prefix+".daemon")
		} else if len(mt) > 0 {
			daemon.add(mib(mt[len(mt)-1].MemUsed))
		}
	}
	ms.setAs(b.res, b.side, prefix)
	b.res.Set(prefix+".daemon", b.side, daemon)
}

// startWorkload starts workloadPy in the background in sandbox conn and
// waits until it printed ready (e.g. "hogready").
func startWorkload(ctx context.Context, conn *client.SandboxConn, ready string, modes ...string) error {
	out := "/tmp/workload.out"
	if code, err := conn.Exec(ctx, client.ExecOptions{Cmd: backgroundArgv(out, modes...)}); err != nil || code != 0 {
		return fmt.Errorf("start workload: exit %d: %v", code, err)
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		b, err := conn.ReadFile(ctx, out)
		if err == nil && bytes.Contains(b, []byte(ready)) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("workload not ready (%q): %v", b, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// sandboxWith creates a sandbox running workloadPy with modes (none: tiny).
func (b *fbBench) sandboxWith(ctx context.Context, modes ...string) (*client.Sandbox, error) {
	sb, err := b.create(ctx)
	if err != nil {
		return nil, err
	}
	if len(modes) == 0 {
		return sb, nil
	}
	ready := "hogready"
	if slices.Contains(modes, "gap") {
		ready = "gapready"
	}
	if err := startWorkload(ctx, sb.Conn(), ready, modes...); err != nil {
		b.kill(ctx, sb.SandboxID)
		return nil, err
	}
	return sb, nil
}
