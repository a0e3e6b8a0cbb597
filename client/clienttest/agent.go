package clienttest

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"connectrpc.com/connect"

	"github.com/forkbox/forkbox/api/gen/filesystem/filesystemconnect"
	"github.com/forkbox/forkbox/api/gen/process"
	"github.com/forkbox/forkbox/api/gen/process/processconnect"
)

type ctxKey struct{}

// sandboxID returns the id of the sandbox a data-plane request was routed to.
func sandboxID(ctx context.Context) string {
	id, _ := ctx.Value(ctxKey{}).(string)
	return id
}

// dataPlane checks the routing headers as the daemon's proxy does, then
// serves the fake agent.
func (s *Server) dataPlane() http.Handler {
	mux := http.NewServeMux()
	mux.Handle(processconnect.NewProcessHandler(&procService{s: s}))
	mux.Handle(filesystemconnect.NewFilesystemHandler(&fsService{s: s}))
	mux.HandleFunc("GET /files", s.download)
	mux.HandleFunc("POST /files", s.upload)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("E2b-Sandbox-Id")
		s.mu.Lock()
		sb, ok := s.sandboxes[id]
		var token, state string
		var secure bool
		if ok {
			token, state, secure = sb.Token, sb.Info.State, sb.Secure
		}
		s.mu.Unlock()
		switch {
		case !ok:
			writeJSON(w, http.StatusBadGateway, map[string]any{"message": "The sandbox was not found", "sandboxId": id, "code": 502})
		case r.Header.Get("E2b-Sandbox-Port") != "49983":
			writeError(w, http.StatusBadGateway, "only the envd port is served by the fake")
		case secure && r.Header.Get("X-Access-Token") != token:
			writeError(w, http.StatusUnauthorized, "invalid access token")
		case state != "running":
			writeError(w, http.StatusConflict, "sandbox is "+state)
		default:
			mux.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), ctxKey{}, id)))
		}
	})
}

// basicUser extracts the envd user from "Authorization: Basic base64(user:)".
func basicUser(h http.Header) string {
	v, ok := strings.CutPrefix(h.Get("Authorization"), "Basic ")
	if !ok {
		return ""
	}
	raw, err := base64.StdEncoding.DecodeString(v)
	if err != nil {
		return ""
	}
	user, _, _ := strings.Cut(string(raw), ":")
	return user
}

type fakeProcess struct {
	stdin *io.PipeWriter
}

// procService is the fake envd process service. Commands are not run: a tiny
// interpreter understands the builtins listed on Server.run.
type procService struct {
	processconnect.UnimplementedProcessHandler
	s *Server
}

// Start implements processconnect.ProcessHandler.
func (p *procService) Start(ctx context.Context, req *connect.Request[process.StartRequest], stream *connect.ServerStream[process.StartResponse]) error {
	s := p.s
	var stdin io.Reader = strings.NewReader("")
	s.mu.Lock()
	s.pid++
	pid := s.pid
	var pr *io.PipeReader
	if req.Msg.Stdin == nil || req.Msg.GetStdin() {
		var pw *io.PipeWriter
		pr, pw = io.Pipe()
		stdin = pr
		s.procs[pid] = &fakeProcess{stdin: pw}
		// A command blocked on stdin must end when the client goes away, or
		// the test server could never shut down.
		stop := context.AfterFunc(ctx, func() { pr.CloseWithError(ctx.Err()) })
		defer stop()
	}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.procs, pid)
		s.mu.Unlock()
		if pr != nil {
			pr.CloseWithError(io.ErrClosedPipe) // unblock pending SendInput calls
		}
	}()
	if err := stream.Send(startEvent(pid)); err != nil {
		return err
	}
	out := &eventWriter{stream: stream}
	errw := &eventWriter{stream: stream, stderr: true}
	code := s.run(sandboxID(ctx), req.Msg.GetProcess(), basicUser(req.Header()), stdin, out, errw)
	end := &process.ProcessEvent_EndEvent{ExitCode: int32(code), Exited: true, Status: "exit status " + strconv.Itoa(code)}
	return stream.Send(&process.StartResponse{Event: &process.ProcessEvent{Event: &process.ProcessEvent_End{End: end}}})
}

func startEvent(pid uint32) *process.StartResponse {
	start := &process.ProcessEvent_StartEvent{Pid: pid}
	return &process.StartResponse{Event: &process.ProcessEvent{Event: &process.ProcessEvent_Start{Start: start}}}
}

// eventWriter turns each Write into one data event, so tests see output
// streamed in the order the command produced it.
type eventWriter struct {
	stream *connect.ServerStream[process.StartResponse]
	stderr bool
}

func (e *eventWriter) Write(b []byte) (int, error) {
	d := &process.ProcessEvent_DataEvent{Output: &process.ProcessEvent_DataEvent_Stdout{Stdout: b}}
	if e.stderr {
		d.Output = &process.ProcessEvent_DataEvent_Stderr{Stderr: b}
	}
	ev := &process.ProcessEvent{Event: &process.ProcessEvent_Data{Data: d}}
	if err := e.stream.Send(&process.StartResponse{Event: ev}); err != nil {
		return 0, err
	}
	return len(b), nil
}

func (p *procService) input(sel *process.ProcessSelector) (*fakeProcess, error) {
	p.s.mu.Lock()
	defer p.s.mu.Unlock()
	proc, ok := p.s.procs[sel.GetPid()]
	if !ok {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("process %d not found", sel.GetPid()))
	}
	return proc, nil
}

// SendInput implements processconnect.ProcessHandler.
func (p *procService) SendInput(ctx context.Context, req *connect.Request[process.SendInputRequest]) (*connect.Response[process.SendInputResponse], error) {
	proc, err := p.input(req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	if _, err := proc.stdin.Write(req.Msg.GetInput().GetStdin()); err != nil {
		return nil, connect.NewError(connect.CodeFailedPrecondition, err)
	}
	return connect.NewResponse(&process.SendInputResponse{}), nil
}

// CloseStdin implements processconnect.ProcessHandler.
func (p *procService) CloseStdin(ctx context.Context, req *connect.Request[process.CloseStdinRequest]) (*connect.Response[process.CloseStdinResponse], error) {
	proc, err := p.input(req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	proc.stdin.Close()
	return connect.NewResponse(&process.CloseStdinResponse{}), nil
}

// SendSignal implements processconnect.ProcessHandler; the fake's commands
// finish on their own, so signals are accepted and ignored.
func (p *procService) SendSignal(ctx context.Context, req *connect.Request[process.SendSignalRequest]) (*connect.Response[process.SendSignalResponse], error) {
	return connect.NewResponse(&process.SendSignalResponse{}), nil
}
