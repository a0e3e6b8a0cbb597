package clienttest

import (
	"context"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"connectrpc.com/connect"

	"github.com/forkbox/forkbox/api/gen/filesystem/filesystemconnect"
	"github.com/forkbox/forkbox/api/gen/process"
	"github.com/forkbox/forkbox/api/gen/process/processconnect"
)

// EnvdVersion is the envd version the fake agent reports.
const EnvdVersion = "0.6.4"

// agent is the fake envd inside one fake sandbox: the process and
// filesystem services and the HTTP routes the daemon (/init, /health) and
// the SDK (/files) use. The real agent (internal/agent) cannot stand in: it
// runs commands and touches files on the host as the named users, which a
// test must not do. Checkpoints carry an agent's files, env vars and token
// (it is a fake.Cloner), as a real checkpoint carries the guest's memory.
type agent struct {
	handler http.Handler

	mu      sync.Mutex
	files   map[string][]byte // absolute path → content; directories end in "/"
	envVars map[string]string // set by /init
	token   string            // envd access token, set by /init
	procs   map[uint32]*fakeProcess
	pid     uint32
}

func newAgent() *agent {
	a := &agent{files: map[string][]byte{}, procs: map[uint32]*fakeProcess{}}
	mux := http.NewServeMux()
	mux.Handle(processconnect.NewProcessHandler(&procService{a: a}))
	mux.Handle(filesystemconnect.NewFilesystemHandler(&fsService{a: a}))
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	mux.HandleFunc("POST /init", a.init)
	mux.HandleFunc("GET /files", a.download)
	mux.HandleFunc("POST /files", a.upload)
	mux.HandleFunc("POST /forkbox/apply", a.apply)
	a.handler = a.withAuth(mux)
	return a
}

// ServeHTTP implements http.Handler.
func (a *agent) ServeHTTP(w http.ResponseWriter, r *http.Request) { a.handler.ServeHTTP(w, r) }

// Clone implements fake.Cloner: the restored sandbox starts with a copy of
// this one's state and no processes.
func (a *agent) Clone() http.Handler {
	a.mu.Lock()
	defer a.mu.Unlock()
	c := newAgent()
	c.files, c.envVars, c.token = copyFiles(a.files), maps.Clone(a.envVars), a.token
	return c
}

// withAuth requires the access token, once set, on everything but /health,
// as envd does.
func (a *agent) withAuth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		token := a.token
		a.mu.Unlock()
		if token != "" && r.URL.Path != "/health" &&
			subtle.ConstantTimeCompare([]byte(r.Header.Get("X-Access-Token")), []byte(token)) != 1 {
			writeError(w, http.StatusUnauthorized, "missing or invalid access token")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// init takes the env vars and access token the daemon hands a new or
// restored sandbox.
func (a *agent) init(w http.ResponseWriter, r *http.Request) {
	var b struct {
		EnvVars     map[string]string `json:"envVars"`
		AccessToken string            `json:"accessToken"`
	}
	if err := json.NewDecoder(r.Body).Decode(&b); err != nil {
		writeError(w, http.StatusBadRequest, "invalid body: "+err.Error())
		return
	}
	a.mu.Lock()
	a.envVars, a.token = b.EnvVars, b.AccessToken
	a.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]any{"code": status, "message": msg})
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
// interpreter understands the builtins listed on agent.run.
type procService struct {
	processconnect.UnimplementedProcessHandler
	a *agent
}

// Start implements processconnect.ProcessHandler.
func (p *procService) Start(ctx context.Context, req *connect.Request[process.StartRequest], stream *connect.ServerStream[process.StartResponse]) error {
	a := p.a
	var stdin io.Reader = strings.NewReader("")
	a.mu.Lock()
	a.pid++
	pid := a.pid
	var pr *io.PipeReader
	if req.Msg.Stdin == nil || req.Msg.GetStdin() {
		var pw *io.PipeWriter
		pr, pw = io.Pipe()
		stdin = pr
		a.procs[pid] = &fakeProcess{stdin: pw}
		// A command blocked on stdin must end when the client goes away, or
		// the test server could never shut down.
		stop := context.AfterFunc(ctx, func() { pr.CloseWithError(ctx.Err()) })
		defer stop()
	}
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		delete(a.procs, pid)
		a.mu.Unlock()
		if pr != nil {
			pr.CloseWithError(io.ErrClosedPipe) // unblock pending SendInput calls
		}
	}()
	if err := stream.Send(startEvent(pid)); err != nil {
		return err
	}
	out := &eventWriter{stream: stream}
	errw := &eventWriter{stream: stream, stderr: true}
	code := a.run(req.Msg.GetProcess(), basicUser(req.Header()), stdin, out, errw)
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
	p.a.mu.Lock()
	defer p.a.mu.Unlock()
	proc, ok := p.a.procs[sel.GetPid()]
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

// CloneFiles is Clone for a filesystem-only checkpoint (fake.FilesCloner):
// the files survive, the env vars and token in memory do not; the daemon
// hands them over again with /init.
func (a *agent) CloneFiles() http.Handler {
	a.mu.Lock()
	defer a.mu.Unlock()
	c := newAgent()
	c.files = copyFiles(a.files)
	return c
}
