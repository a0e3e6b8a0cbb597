package agent

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"syscall"
	"time"

	"connectrpc.com/connect"

	pb "github.com/forkbox/forkbox/api/gen/process"
)

// defaultKeepalive is the keepalive period when the client asks for none.
const defaultKeepalive = 90 * time.Second

// processService implements process.Process.
type processService struct {
	a *Agent
}

// Start runs a command and streams its start, output and end events.
func (s *processService) Start(ctx context.Context, req *connect.Request[pb.StartRequest], stream *connect.ServerStream[pb.StartResponse]) error {
	acct, err := s.a.requestAccount(req.Header())
	if err != nil {
		return connect.NewError(connect.CodeUnauthenticated, err)
	}
	if req.Msg.Tag != nil && s.a.procs.tagInUse(req.Msg.GetTag()) {
		return connect.NewError(connect.CodeAlreadyExists, fmt.Errorf("a process with tag %q is running", req.Msg.GetTag()))
	}
	sp, err := s.a.buildSpawn(req.Msg, acct)
	if err != nil {
		return connect.NewError(connect.CodeInvalidArgument, err)
	}
	p := &managedProc{tag: req.Msg.Tag, config: req.Msg.GetProcess(), events: newBroadcaster()}
	p.onStart = func() { s.a.procs.add(p); s.a.processStarted(p) }
	done := make(chan struct{})
	p.onEnd = func(end *pb.ProcessEvent_EndEvent) {
		s.a.procs.remove(p)
		s.a.processEnded(p, end.GetExitCode(), end.GetStatus())
		close(done)
	}
	// Subscribe before starting so not a byte of early output is missed.
	sub := p.events.subscribe()
	defer sub.unsubscribe()
	if err := s.a.startPooled(p, req.Msg, acct, sp, requestTimeout(req.Header()), hostBusy(req.Header()), done); err != nil {
		return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("start %q: %w", req.Msg.GetProcess().GetCmd(), err))
	}
	s.a.log.Debug("process started", "pid", p.pid, "cmd", sp.cmd.Path, "user", acct.Name)
	send := func(ev *pb.ProcessEvent) error { return stream.Send(&pb.StartResponse{Event: ev}) }
	return streamEvents(ctx, p.pid, sub, keepaliveInterval(req.Header()), send)
}

// Connect attaches to a running process: a start event with its pid, then
// all output produced from now on, then the end event.
func (s *processService) Connect(ctx context.Context, req *connect.Request[pb.ConnectRequest], stream *connect.ServerStream[pb.ConnectResponse]) error {
	p, err := s.a.procs.find(req.Msg.GetProcess())
	if err != nil {
		return err
	}
	sub := p.events.subscribe()
	defer sub.unsubscribe()
	send := func(ev *pb.ProcessEvent) error { return stream.Send(&pb.ConnectResponse{Event: ev}) }
	return streamEvents(ctx, p.pid, sub, keepaliveInterval(req.Header()), send)
}

// streamEvents sends the start event and then everything sub receives,
// with keepalives while idle, until the end event or the client leaves.
func streamEvents(ctx context.Context, pid uint32, sub *subscriber, keepalive time.Duration, send func(*pb.ProcessEvent) error) error {
	start := &pb.ProcessEvent{Event: &pb.ProcessEvent_Start{Start: &pb.ProcessEvent_StartEvent{Pid: pid}}}
	if err := send(start); err != nil {
		return err
	}
	ticker := time.NewTicker(keepalive)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ticker.C:
			if err := send(&pb.ProcessEvent{Event: &pb.ProcessEvent_Keepalive{Keepalive: &pb.ProcessEvent_KeepAlive{}}}); err != nil {
				return err
			}
			continue
		case <-sub.notify:
		}
		evs, done, over := sub.take()
		for _, ev := range evs {
			if err := send(ev); err != nil {
				return err
			}
		}
		if over {
			return connect.NewError(connect.CodeResourceExhausted, errors.New("client fell too far behind the process output"))
		}
		if done {
			return nil
		}
		ticker.Reset(keepalive)
	}
}

// keepaliveInterval reads the client's Keepalive-Ping-Interval (seconds).
func keepaliveInterval(h http.Header) time.Duration {
	secs, err := strconv.ParseInt(h.Get("Keepalive-Ping-Interval"), 10, 64)
	if err != nil || secs <= 0 || secs > 24*3600 {
		return defaultKeepalive
	}
	return time.Duration(secs) * time.Second
}

// hostBusy reads the daemon's Forkbox-Host-Busy-Ms (its sandbox package's
// HostBusyHeader): the host is busy that long with requests to other
// sandboxes let in after this one. Bounded, so a wrong value cannot keep
// the pool empty for long.
func hostBusy(h http.Header) time.Duration {
	return time.Duration(min(headerMillis(h, "Forkbox-Host-Busy-Ms"), maxHostBusyMs)) * time.Millisecond
}

// maxHostBusyMs bounds hostBusy: the daemon sends at most 10 s.
const maxHostBusyMs = 10_000

// requestTimeout reads Connect-Timeout-Ms: envd kills a started process
// when the client's timeout for its Start call runs out, and clients rely on
// that (timeoutMs: 0 keeps a process alive indefinitely).
func requestTimeout(h http.Header) time.Duration {
	return time.Duration(headerMillis(h, "Connect-Timeout-Ms")) * time.Millisecond
}

// headerMillis reads header name as a positive count of milliseconds; 0
// when it is absent or not one.
func headerMillis(h http.Header, name string) int64 {
	ms, err := strconv.ParseInt(h.Get(name), 10, 64)
	if err != nil || ms <= 0 {
		return 0
	}
	return ms
}

// List returns the running processes.
func (s *processService) List(ctx context.Context, req *connect.Request[pb.ListRequest]) (*connect.Response[pb.ListResponse], error) {
	return connect.NewResponse(&pb.ListResponse{Processes: s.a.procs.list()}), nil
}

// Update resizes a process's PTY.
func (s *processService) Update(ctx context.Context, req *connect.Request[pb.UpdateRequest]) (*connect.Response[pb.UpdateResponse], error) {
	p, err := s.a.procs.find(req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	if req.Msg.Pty != nil {
		if err := p.resize(req.Msg.GetPty().GetSize()); err != nil {
			return nil, connect.NewError(connect.CodeFailedPrecondition, err)
		}
	}
	return connect.NewResponse(&pb.UpdateResponse{}), nil
}

// SendInput writes one chunk to a process.
func (s *processService) SendInput(ctx context.Context, req *connect.Request[pb.SendInputRequest]) (*connect.Response[pb.SendInputResponse], error) {
	p, err := s.a.procs.find(req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	if err := p.writeInput(req.Msg.GetInput()); err != nil {
		return nil, inputError(err)
	}
	return connect.NewResponse(&pb.SendInputResponse{}), nil
}

// StreamInput writes a client stream of chunks to one process, in order.
// The first message must name the process.
func (s *processService) StreamInput(ctx context.Context, stream *connect.ClientStream[pb.StreamInputRequest]) (*connect.Response[pb.StreamInputResponse], error) {
	var p *managedProc
	for stream.Receive() {
		switch ev := stream.Msg().GetEvent().(type) {
		case *pb.StreamInputRequest_Start:
			found, err := s.a.procs.find(ev.Start.GetProcess())
			if err != nil {
				return nil, err
			}
			p = found
		case *pb.StreamInputRequest_Data:
			if p == nil {
				return nil, connect.NewError(connect.CodeFailedPrecondition, errors.New("first message must be a start event naming the process"))
			}
			if err := p.writeInput(ev.Data.GetInput()); err != nil {
				return nil, inputError(err)
			}
		}
	}
	if err := stream.Err(); err != nil {
		return nil, err
	}
	return connect.NewResponse(&pb.StreamInputResponse{}), nil
}

// inputError classifies a failed write to a process.
func inputError(err error) error {
	if errors.Is(err, errNoStdin) || errors.Is(err, errNoPTY) || errors.Is(err, errHasPTY) {
		return connect.NewError(connect.CodeFailedPrecondition, err)
	}
	return connect.NewError(connect.CodeInternal, err)
}

// CloseStdin closes a process's stdin.
func (s *processService) CloseStdin(ctx context.Context, req *connect.Request[pb.CloseStdinRequest]) (*connect.Response[pb.CloseStdinResponse], error) {
	p, err := s.a.procs.find(req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	if p.tty != nil {
		return nil, connect.NewError(connect.CodeFailedPrecondition, errHasPTY)
	}
	if err := p.CloseStdin(); err != nil {
		return nil, connect.NewError(connect.CodeInternal, err)
	}
	return connect.NewResponse(&pb.CloseStdinResponse{}), nil
}

// SendSignal delivers SIGTERM or SIGKILL.
func (s *processService) SendSignal(ctx context.Context, req *connect.Request[pb.SendSignalRequest]) (*connect.Response[pb.SendSignalResponse], error) {
	p, err := s.a.procs.find(req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	var sig syscall.Signal
	switch req.Msg.GetSignal() {
	case pb.Signal_SIGNAL_SIGKILL:
		sig = syscall.SIGKILL
	case pb.Signal_SIGNAL_SIGTERM:
		sig = syscall.SIGTERM
	default:
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("unsupported signal %v", req.Msg.GetSignal()))
	}
	if err := p.signal(sig); err != nil {
		if errors.Is(err, errProcessGone) {
			return nil, connect.NewError(connect.CodeNotFound, err)
		}
		return nil, connect.NewError(connect.CodeInternal, err)
	}
	return connect.NewResponse(&pb.SendSignalResponse{}), nil
}
