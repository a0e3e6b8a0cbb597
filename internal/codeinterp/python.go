package codeinterp

import (
	"bufio"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os/exec"
	"time"
)

//go:embed worker.py
var workerSource []byte

// workerStartTimeout bounds how long a new Python worker may take to report
// that it is ready.
const workerStartTimeout = 30 * time.Second

// execError is a failure reported to the client as an error event with
// this name.
type execError struct {
	Name, Value string
}

func (e *execError) Error() string { return e.Name + ": " + e.Value }

// errStuck reports a cell that ignored interrupts for the grace period.
var errStuck = &execError{"KernelRestarting", "the cell did not stop after an interrupt; its context was restarted"}

// pyKernel is one Python worker process (see worker.py for its protocol).
type pyKernel struct {
	log    *slog.Logger
	p      *proc
	lines  chan []byte // protocol lines from the worker; closed at EOF
	grace  time.Duration
	stderr tail
	nextID int64
}

// startPython starts a worker in cwd and waits until it is ready.
func (s *Server) startPython(ctx context.Context, cwd string) (kernel, error) {
	script, err := s.worker.get()
	if err != nil {
		return nil, fmt.Errorf("write worker script: %w", err)
	}
	acct, err := s.account()
	if err != nil {
		return nil, err
	}
	p, stdout, stderr, err := startProc(exec.Command(s.cfg.Python, "-u", script), acct, cwd)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", s.cfg.Python, err)
	}
	k := &pyKernel{log: s.log, p: p, lines: make(chan []byte, 16), grace: s.cfg.InterruptGrace}
	go k.readLines(stdout)
	go logStderr(s.log, stderr, &k.stderr)
	timer := time.NewTimer(workerStartTimeout)
	defer timer.Stop()
	select {
	case line, ok := <-k.lines:
		if ok && lineType(line).Type == "ready" {
			return k, nil
		}
		err = fmt.Errorf("python worker failed to start: %s", k.stderr.String())
	case <-timer.C:
		err = errors.New("python worker did not start in time")
	case <-ctx.Done():
		err = ctx.Err()
	}
	k.close()
	return nil, err
}

// readLines forwards the worker's protocol lines; lines can be large (a
// base64 PNG), so there is no length limit.
func (k *pyKernel) readLines(r io.ReadCloser) {
	defer close(k.lines)
	defer r.Close()
	br := bufio.NewReaderSize(r, 64*1024)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 1 {
			k.lines <- line[:len(line)-1]
		}
		if err != nil {
			return
		}
	}
}

type header struct {
	Type string `json:"type"`
	ID   int64  `json:"id"`
}

func lineType(line []byte) header {
	var h header
	if json.Unmarshal(line, &h) != nil {
		h.Type = ""
	}
	return h
}

func (k *pyKernel) alive() bool { return k.p.alive() }

func (k *pyKernel) close() { k.p.kill() }

// execute sends the cell and forwards the worker's events until it reports
// the cell done. Cancelling ctx interrupts the cell with SIGINT; a cell
// that ignores it for the grace period gets its worker killed.
func (k *pyKernel) execute(ctx context.Context, req cellRequest, emit func([]byte)) error {
	k.nextID++
	id := k.nextID
	msg, err := json.Marshal(map[string]any{
		"type": "execute", "id": id, "code": req.Code, "env_vars": req.EnvVars, "base_env": req.BaseEnv,
	})
	if err != nil {
		return err
	}
	if _, err := k.p.stdin.Write(append(msg, '\n')); err != nil {
		k.close()
		return k.died()
	}
	in := newInterrupter(ctx, k.p, k.grace)
	defer in.stop()
	for {
		select {
		case line, ok := <-k.lines:
			if !ok {
				return k.died()
			}
			switch h := lineType(line); h.Type {
			case "done":
				if h.ID == id {
					return nil
				}
			case "", "ready":
			default:
				emit(line)
			}
		case <-in.done:
			in.start()
		case <-in.repeat:
			in.resend()
		case <-in.expired:
			k.log.Warn("code interpreter: interrupted cell did not stop; killing its worker")
			k.close()
			return errStuck
		}
	}
}

// died describes a worker that exited during a cell.
func (k *pyKernel) died() error {
	k.close()
	msg := "the Python worker exited; the context's state is lost and the next execution starts a fresh one"
	if t := k.stderr.String(); t != "" {
		msg += ": " + t
	}
	return &execError{"DeadKernelError", msg}
}
