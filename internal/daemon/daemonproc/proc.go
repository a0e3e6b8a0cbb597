// Package daemonproc starts and stops a `forkbox serve` daemon as a child
// process: on a free loopback port, with the binaries of one directory, until
// it answers /health; and stops it so that it leaves nothing behind (every
// sandbox killed through the REST API, SIGTERM with a deadline, runsc's bind
// mounts under the data dir undone). The test harness (internal/daemontest)
// and the benchmark programs (bench, bench/proxythroughput) share it.
//
// It needs root and real runsc, as the daemon does; it has no dependency on
// package testing.
package daemonproc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Defaults of the Options durations.
const (
	DefaultReadyTimeout = 90 * time.Second
	DefaultStopTimeout  = 10 * time.Second
)

// pollInterval is how often Start asks /health.
const pollInterval = 50 * time.Millisecond

// Options tune Start.
type Options struct {
	// Bin is the directory of forkbox, forkbox-agent and runsc.
	Bin string
	// Command is the program and its leading arguments; it defaults to
	// <Bin>/forkbox serve. The standard flags follow it either way.
	Command []string
	// DataDir and TemplateDir are passed as --data-dir and --template-dir.
	DataDir, TemplateDir string
	// Listen is the host:port to serve on; a free loopback port if empty.
	Listen string
	// Args are appended after the standard flags (--listen, --data-dir,
	// --template-dir, --runsc, --agent), so a repeated flag here wins.
	Args []string
	// Env is added to this process's environment for the daemon.
	Env []string
	// LogPath receives the daemon's stdout and stderr, appended (so a
	// restarted daemon continues the same log); <DataDir>/daemon.log if empty.
	LogPath string
	// ReadyTimeout bounds the wait for /health (DefaultReadyTimeout if 0).
	ReadyTimeout time.Duration
	// StopTimeout bounds the wait after SIGTERM before SIGKILL
	// (DefaultStopTimeout if 0).
	StopTimeout time.Duration
	// SysProcAttr is the child's, e.g. Setpgid (so a test can SIGKILL the
	// daemon alone) or Pdeathsig (so it dies with a benchmark program).
	SysProcAttr *syscall.SysProcAttr
}

// Proc is a running (or stopped) daemon.
type Proc struct {
	URL     string // http://host:port
	APIKey  string // read from <DataDir>/api-key once the daemon serves
	DataDir string
	LogPath string

	o      Options
	argv   []string
	cmd    *exec.Cmd
	exited chan struct{}
}

// Start runs the daemon and waits until /health answers 200 and the API key
// is readable. On error the child is stopped again and its mounts under
// DataDir undone; ctx bounds the wait too.
func Start(ctx context.Context, o Options) (*Proc, error) {
	if o.DataDir == "" {
		return nil, errors.New("daemonproc: no data dir")
	}
	if o.ReadyTimeout == 0 {
		o.ReadyTimeout = DefaultReadyTimeout
	}
	if o.StopTimeout == 0 {
		o.StopTimeout = DefaultStopTimeout
	}
	if o.LogPath == "" {
		o.LogPath = filepath.Join(o.DataDir, "daemon.log")
	}
	if o.Listen == "" {
		addr, err := FreeAddr()
		if err != nil {
			return nil, err
		}
		o.Listen = addr
	}
	argv := o.Command
	if len(argv) == 0 {
		argv = []string{filepath.Join(o.Bin, "forkbox"), "serve"}
	}
	argv = append(append([]string(nil), argv...),
		"--listen", o.Listen,
		"--data-dir", o.DataDir,
		"--template-dir", o.TemplateDir,
		"--runsc", filepath.Join(o.Bin, "runsc"),
		"--agent", filepath.Join(o.Bin, "forkbox-agent"))
	p := &Proc{URL: "http://" + o.Listen, DataDir: o.DataDir, LogPath: o.LogPath,
		o: o, argv: append(argv, o.Args...)}
	if err := p.start(ctx); err != nil {
		return nil, err
	}
	return p, nil
}

// FreeAddr returns 127.0.0.1:PORT with a port that was free a moment ago.
func FreeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// Cmdline is the daemon's program and arguments.
func (p *Proc) Cmdline() []string { return append([]string(nil), p.argv...) }

// Pid is the process id of the current daemon process (0 before Start).
func (p *Proc) Pid() int {
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// Exited is closed once the current daemon process has exited.
func (p *Proc) Exited() <-chan struct{} { return p.exited }

// Log returns what the daemon printed so far.
func (p *Proc) Log() string {
	b, _ := os.ReadFile(p.LogPath)
	return string(b)
}

// start starts the process of p.argv and waits until it serves.
func (p *Proc) start(ctx context.Context) error {
	f, err := os.OpenFile(p.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("daemonproc: daemon log: %w", err)
	}
	defer f.Close() // the child has its own descriptor
	cmd := exec.Command(p.argv[0], p.argv[1:]...)
	cmd.Env = append(os.Environ(), p.o.Env...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = p.o.SysProcAttr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("daemonproc: start %s: %w", p.argv[0], err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	p.cmd, p.exited = cmd, exited
	if err := p.waitReady(ctx); err != nil {
		p.terminate()
		detachBelow(p.DataDir)
		return err
	}
	return nil
}

// waitReady polls /health until it answers 200, then reads the API key.
func (p *Proc) waitReady(ctx context.Context) error {
	notReady := fmt.Errorf("daemonproc: daemon not ready after %s; see %s", p.o.ReadyTimeout, p.LogPath)
	ctx, cancel := context.WithTimeoutCause(ctx, p.o.ReadyTimeout, notReady)
	defer cancel()
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.URL+"/health", nil)
		if err != nil {
			return err
		}
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		select {
		case <-p.exited:
			return fmt.Errorf("daemonproc: daemon exited during start-up (%v); see %s", p.cmd.ProcessState, p.LogPath)
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(pollInterval):
		}
	}
	key, err := os.ReadFile(filepath.Join(p.DataDir, "api-key"))
	if err != nil {
		return fmt.Errorf("daemonproc: api key: %w", err)
	}
	p.APIKey = strings.TrimSpace(string(key))
	return nil
}

// running reports whether the current daemon process has not exited.
func (p *Proc) running() bool {
	select {
	case <-p.exited: // closed once the process has exited
		return false
	default: // still running, or never started (a nil channel blocks)
		return p.exited != nil
	}
}

// Kill9 kills the daemon with SIGKILL (its sandboxes keep running) and
// waits until it has exited.
func (p *Proc) Kill9() {
	if !p.running() {
		return
	}
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
}

// Restart starts the daemon again with the same arguments, address and data
// dir, and waits until it serves. The previous process must have exited.
func (p *Proc) Restart(ctx context.Context) error {
	if p.running() {
		return errors.New("daemonproc: restart: the daemon is still running")
	}
	return p.start(ctx)
}

// errKilled reports a daemon that did not exit on SIGTERM in time.
var errKilled = errors.New("daemonproc: the daemon did not stop on SIGTERM in time; killed it")

// killAllTimeout bounds Stop's KillAll.
const killAllTimeout = 2 * time.Minute

// Stop kills every sandbox of a running daemon (KillAll), terminates it
// (SIGTERM, SIGKILL after StopTimeout), waits for it, and then detaches
// each mount point below DataDir once (runsc's bind mount of a null network
// namespace in runtime/runsc), so DataDir can be removed. A mount stacked
// twice, or one on DataDir itself, stays: callers that check for leaks see
// it. Stop after Stop only undoes the mounts; Stop after an exit (a Kill9
// that was not followed by a Restart) also kills the sandboxes it left.
func (p *Proc) Stop(ctx context.Context) error {
	var errs []error
	if p.running() {
		kctx, cancel := context.WithTimeout(ctx, killAllTimeout)
		errs = append(errs, p.KillAll(kctx))
		cancel()
		errs = append(errs, p.terminate())
		errs = append(errs, killLeftovers(p.DataDir))
	} else if p.exited != nil {
		// Killed -9 and never restarted: its sandboxes are still running,
		// as they should be, and nothing else would ever stop them once
		// DataDir is gone. Not an error: the test wanted them left.
		killLeftovers(p.DataDir)
	}
	detachBelow(p.DataDir)
	return errors.Join(errs...)
}

// Terminate stops the daemon the way an operator does (SIGTERM; SIGKILL
// after StopTimeout, which is an error) and leaves its sandboxes running, so
// a caller can check what a stopped daemon left and Restart it.
func (p *Proc) Terminate() error { return p.terminate() }

// terminate sends SIGTERM and waits up to StopTimeout, then SIGKILLs.
func (p *Proc) terminate() error {
	if !p.running() {
		return nil
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		return nil
	case <-time.After(p.o.StopTimeout):
		p.cmd.Process.Kill()
		<-p.exited
		return errKilled
	}
}
