package agent_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/forkbox/forkbox/api/gen/filesystem/filesystemconnect"
	pb "github.com/forkbox/forkbox/api/gen/process"
	"github.com/forkbox/forkbox/api/gen/process/processconnect"
	"github.com/forkbox/forkbox/internal/guest/agent"
)

// testAgent is an agent serving on a loopback port plus clients for it.
type testAgent struct {
	agent *agent.Agent
	url   string
	http  *http.Client
	proc  processconnect.ProcessClient
	fs    filesystemconnect.FilesystemClient
}

// startAgent serves a fresh agent on 127.0.0.1:0 for the test's lifetime.
// Clients speak the Connect protocol with the JSON codec over cleartext
// HTTP/2, as close to the JS SDK as a Go client gets while still allowing
// client streams.
func startAgent(t testing.TB, cfg agent.Config) *testAgent {
	t.Helper()
	if os.Getuid() != 0 {
		t.Fatal("agent tests must run as root (they switch users and chown files)")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.DefaultUser == "" {
		cfg.DefaultUser = "root"
	}
	a := agent.New(cfg)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Serve(ctx, l) }()
	var protocols http.Protocols
	protocols.SetUnencryptedHTTP2(true)
	hc := &http.Client{Transport: &http.Transport{Protocols: &protocols}}
	t.Cleanup(func() {
		hc.CloseIdleConnections() // lets Shutdown finish without waiting
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	base := "http://" + l.Addr().String()
	return &testAgent{
		agent: a,
		url:   base,
		http:  hc,
		proc:  processconnect.NewProcessClient(hc, base, connect.WithProtoJSON()),
		fs:    filesystemconnect.NewFilesystemClient(hc, base, connect.WithProtoJSON()),
	}
}

// asUser sets the Basic auth header the E2B SDK uses to pick the user.
func asUser[T any](req *connect.Request[T], user string) *connect.Request[T] {
	if user != "" {
		req.Header().Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(user+":")))
	}
	return req
}

// result is the collected outcome of one process.
type result struct {
	pid            uint32
	stdout, stderr string
	pty            string
	end            *pb.ProcessEvent_EndEvent
}

// runProcess starts a process and reads its whole event stream.
func (ta *testAgent) runProcess(t *testing.T, req *connect.Request[pb.StartRequest]) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	stream, err := ta.proc.Start(ctx, req)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	defer stream.Close()
	if !stream.Receive() || stream.Msg().GetEvent().GetStart() == nil {
		t.Fatalf("first event is not a start event (err %v)", stream.Err())
	}
	pid := stream.Msg().GetEvent().GetStart().GetPid()
	res, _ := collect(stream.Receive, func() *pb.ProcessEvent { return stream.Msg().GetEvent() })
	res.pid = pid
	if err := stream.Err(); err != nil {
		t.Fatalf("stream error: %v", err)
	}
	return res
}

// collect drains the rest of an event stream into a result.
func collect(receive func() bool, msg func() *pb.ProcessEvent) (result, error) {
	var res result
	var out, errOut, pty bytes.Buffer
	for receive() {
		ev := msg()
		switch {
		case ev.GetStart() != nil:
			res.pid = ev.GetStart().GetPid()
		case ev.GetData() != nil:
			out.Write(ev.GetData().GetStdout())
			errOut.Write(ev.GetData().GetStderr())
			pty.Write(ev.GetData().GetPty())
		case ev.GetEnd() != nil:
			res.end = ev.GetEnd()
		}
	}
	res.stdout, res.stderr, res.pty = out.String(), errOut.String(), pty.String()
	return res, nil
}

// shell builds a StartRequest for /bin/sh -c script.
func shell(script string) *pb.StartRequest {
	return &pb.StartRequest{Process: &pb.ProcessConfig{Cmd: "/bin/sh", Args: []string{"-c", script}}}
}

func TestHealthAndVersion(t *testing.T) {
	ta := startAgent(t, agent.Config{})
	resp, err := ta.http.Get(ta.url + "/health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("GET /health = %d, want 204", resp.StatusCode)
	}
	if agent.Version < "0.6.4" {
		t.Fatalf("Version %q must be at least 0.6.4", agent.Version)
	}
}
