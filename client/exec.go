package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"connectrpc.com/connect"

	"github.com/forkbox/forkbox/api/gen/process"
)

// ExecOptions describe a command to run in a sandbox. Exactly one of Cmd and
// Shell must be set.
type ExecOptions struct {
	// Cmd is an argv: Cmd[0] is run directly with Cmd[1:] as arguments.
	Cmd []string
	// Shell is a command line run with `bash -l -c`, as the E2B SDKs do.
	Shell string
	// Env adds environment variables for this command.
	Env map[string]string
	// Cwd is the working directory; empty means the user's home.
	Cwd string
	// User runs the command as this user; empty uses the connection's user.
	User string
	// Stdin, when set, is copied to the command's stdin, which is closed at
	// EOF. When nil the command gets no stdin. A Read still blocked when the
	// command ends is left to finish in the background.
	Stdin io.Reader
	// Stdout and Stderr receive output as it arrives; nil discards it.
	Stdout io.Writer
	Stderr io.Writer
}

// keepaliveSeconds asks the agent to send keepalive events on idle streams so
// proxies do not cut long, quiet commands.
const keepaliveSeconds = "50"

// Exec runs a command to completion, streaming its output, and returns its
// exit code. err is non-nil only when the command could not be run or
// followed (an exit code other than 0 is not an error). Cancelling ctx kills
// the remote command.
func (s *SandboxConn) Exec(ctx context.Context, o ExecOptions) (int, error) {
	cfg, err := processConfig(o)
	if err != nil {
		return -1, err
	}
	stdin := o.Stdin != nil
	req := connect.NewRequest(&process.StartRequest{Process: cfg, Stdin: &stdin})
	req.Header().Set("Keepalive-Ping-Interval", keepaliveSeconds)
	user := o.User
	if user == "" {
		user = s.user
	}
	setUser(req.Header(), user)
	stream, err := s.proc.Start(ctx, req)
	if err != nil {
		return -1, fmt.Errorf("exec in %s: %w", s.id, err)
	}
	defer stream.Close()
	code, err := s.follow(ctx, stream, o, user)
	if err != nil {
		return -1, fmt.Errorf("exec in %s: %w", s.id, err)
	}
	return code, nil
}

func processConfig(o ExecOptions) (*process.ProcessConfig, error) {
	cfg := &process.ProcessConfig{Envs: o.Env}
	switch {
	case len(o.Cmd) > 0 && o.Shell != "":
		return nil, fmt.Errorf("exec: set Cmd or Shell, not both: %w", ErrBadRequest)
	case len(o.Cmd) > 0:
		cfg.Cmd, cfg.Args = o.Cmd[0], o.Cmd[1:]
	case o.Shell != "":
		cfg.Cmd, cfg.Args = "/bin/bash", []string{"-l", "-c", o.Shell}
	default:
		return nil, fmt.Errorf("exec: no command: %w", ErrBadRequest)
	}
	if o.Cwd != "" {
		cfg.Cwd = &o.Cwd
	}
	return cfg, nil
}

// follow consumes the event stream until the end event.
func (s *SandboxConn) follow(ctx context.Context, stream *connect.ServerStreamForClient[process.StartResponse], o ExecOptions, user string) (int, error) {
	stdout, stderr := orDiscard(o.Stdout), orDiscard(o.Stderr)
	var pid uint32
	for stream.Receive() {
		ev := stream.Msg().GetEvent()
		switch {
		case ev.GetStart() != nil:
			pid = ev.GetStart().GetPid()
			if o.Stdin != nil {
				go s.pumpStdin(ctx, pid, user, o.Stdin)
			}
		case ev.GetData() != nil:
			if err := writeData(ev.GetData(), stdout, stderr); err != nil {
				s.kill(pid, user)
				return -1, err
			}
		case ev.GetEnd() != nil:
			// Read on to the end of the stream (the end-of-stream
			// message follows at once): a stream closed before its end
			// costs both hops of the proxy their pooled connections, and
			// the next call a new connection into the sandbox.
			for stream.Receive() {
			}
			return endCode(ev.GetEnd()), nil
		}
	}
	err := stream.Err()
	if ctx.Err() != nil && pid != 0 {
		s.kill(pid, user)
	}
	if err == nil {
		err = errors.New("stream ended before the command's exit status")
	}
	return -1, err
}

func writeData(d *process.ProcessEvent_DataEvent, stdout, stderr io.Writer) error {
	var err error
	switch {
	case d.GetStdout() != nil:
		_, err = stdout.Write(d.GetStdout())
	case d.GetStderr() != nil:
		_, err = stderr.Write(d.GetStderr())
	case d.GetPty() != nil:
		_, err = stdout.Write(d.GetPty())
	}
	if err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	return nil
}

// endCode maps an end event to an exit code; a process killed by a signal
// reports -1 unless the agent already encoded it (128+n).
func endCode(e *process.ProcessEvent_EndEvent) int {
	if !e.GetExited() && e.GetExitCode() == 0 {
		return -1
	}
	return int(e.GetExitCode())
}

// pumpStdin copies r to the process's stdin chunk by chunk and closes stdin
// at EOF. Errors are dropped: the command's own end event says what happened.
func (s *SandboxConn) pumpStdin(ctx context.Context, pid uint32, user string, r io.Reader) {
	sel := &process.ProcessSelector{Selector: &process.ProcessSelector_Pid{Pid: pid}}
	buf := make([]byte, 32<<10)
	for {
		n, rerr := r.Read(buf)
		if n > 0 {
			in := &process.ProcessInput{Input: &process.ProcessInput_Stdin{Stdin: append([]byte(nil), buf[:n]...)}}
			req := connect.NewRequest(&process.SendInputRequest{Process: sel, Input: in})
			setUser(req.Header(), user)
			if _, err := s.proc.SendInput(ctx, req); err != nil {
				return
			}
		}
		if rerr != nil {
			break
		}
	}
	req := connect.NewRequest(&process.CloseStdinRequest{Process: sel})
	setUser(req.Header(), user)
	_, _ = s.proc.CloseStdin(ctx, req)
}

// kill sends SIGKILL with a fresh short context, because the caller's may be
// the one that was cancelled.
func (s *SandboxConn) kill(pid uint32, user string) {
	if pid == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	sel := &process.ProcessSelector{Selector: &process.ProcessSelector_Pid{Pid: pid}}
	req := connect.NewRequest(&process.SendSignalRequest{Process: sel, Signal: process.Signal_SIGNAL_SIGKILL})
	setUser(req.Header(), user)
	_, _ = s.proc.SendSignal(ctx, req)
}

func orDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}
