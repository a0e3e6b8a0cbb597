package agent_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	pb "github.com/forkbox/forkbox/api/gen/process"
	"github.com/forkbox/forkbox/internal/guest/agent"
)

func TestStartCollectsOutput(t *testing.T) {
	ta := startAgent(t, agent.Config{EnvVars: map[string]string{"FROM_INIT": "init-value"}})
	dir := t.TempDir()
	cwd := dir
	tests := []struct {
		name       string
		req        *pb.StartRequest
		user       string
		wantStdout string
		wantStderr string
		wantCode   int32
	}{
		{name: "stdout", req: shell("echo hello"), wantStdout: "hello\n"},
		{name: "stderr and exit code", req: shell("echo oops >&2; exit 3"), wantStderr: "oops\n", wantCode: 3},
		{name: "cmd looked up in PATH", req: &pb.StartRequest{Process: &pb.ProcessConfig{Cmd: "echo", Args: []string{"a", "b"}}}, wantStdout: "a b\n"},
		{name: "request env", req: &pb.StartRequest{Process: &pb.ProcessConfig{Cmd: "/bin/sh", Args: []string{"-c", "echo $FOO"}, Envs: map[string]string{"FOO": "bar"}}}, wantStdout: "bar\n"},
		{name: "init env", req: shell("echo $FROM_INIT"), wantStdout: "init-value\n"},
		{name: "cwd", req: &pb.StartRequest{Process: &pb.ProcessConfig{Cmd: "pwd", Cwd: &cwd}}, wantStdout: dir + "\n"},
		{name: "root defaults", req: shell(`echo "$(id -u) $HOME $USER $(pwd)"`), wantStdout: "0 /root root /root\n"},
		{name: "as nobody", req: shell(`echo "$(id -u) $(id -g) $USER"`), user: "nobody", wantStdout: "65534 65534 nobody\n"},
		{name: "nobody without home starts in /", req: shell("pwd"), user: "nobody", wantStdout: "/\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := ta.runProcess(t, asUser(connect.NewRequest(tc.req), tc.user))
			if res.stdout != tc.wantStdout || res.stderr != tc.wantStderr {
				t.Errorf("stdout %q stderr %q, want %q %q", res.stdout, res.stderr, tc.wantStdout, tc.wantStderr)
			}
			if res.end == nil || res.end.GetExitCode() != tc.wantCode || !res.end.GetExited() {
				t.Errorf("end = %v, want exit code %d", res.end, tc.wantCode)
			}
			if res.pid == 0 {
				t.Errorf("no pid in start event")
			}
		})
	}
}

func TestStartErrors(t *testing.T) {
	ta := startAgent(t, agent.Config{})
	missing := "/does/not/exist"
	tests := []struct {
		name string
		req  *connect.Request[pb.StartRequest]
		code connect.Code
	}{
		{"missing binary", connect.NewRequest(&pb.StartRequest{Process: &pb.ProcessConfig{Cmd: "no-such-binary-xyz"}}), connect.CodeInvalidArgument},
		{"missing cwd", connect.NewRequest(&pb.StartRequest{Process: &pb.ProcessConfig{Cmd: "true", Cwd: &missing}}), connect.CodeInvalidArgument},
		{"unknown user", asUser(connect.NewRequest(shell("true")), "no-such-user-xyz"), connect.CodeUnauthenticated},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			stream, err := ta.proc.Start(context.Background(), tc.req)
			if err == nil {
				for stream.Receive() {
				}
				err = stream.Err()
			}
			if connect.CodeOf(err) != tc.code {
				t.Fatalf("err = %v, want code %v", err, tc.code)
			}
		})
	}
}

func TestStdinAndCloseStdin(t *testing.T) {
	ta := startAgent(t, agent.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stdin := true
	tag := "cat-stdin"
	stream, err := ta.proc.Start(ctx, connect.NewRequest(&pb.StartRequest{
		Process: &pb.ProcessConfig{Cmd: "cat"}, Stdin: &stdin, Tag: &tag,
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	if !stream.Receive() || stream.Msg().GetEvent().GetStart() == nil {
		t.Fatalf("no start event: %v", stream.Err())
	}
	byTag := &pb.ProcessSelector{Selector: &pb.ProcessSelector_Tag{Tag: tag}}
	in := &pb.ProcessInput{Input: &pb.ProcessInput_Stdin{Stdin: []byte("one\n")}}
	if _, err := ta.proc.SendInput(ctx, connect.NewRequest(&pb.SendInputRequest{Process: byTag, Input: in})); err != nil {
		t.Fatal(err)
	}
	// StreamInput is a client stream: it needs HTTP/2, which the test
	// client speaks in cleartext (h2c).
	is := ta.proc.StreamInput(ctx)
	_ = is.Send(&pb.StreamInputRequest{Event: &pb.StreamInputRequest_Start{Start: &pb.StreamInputRequest_StartEvent{Process: byTag}}})
	_ = is.Send(&pb.StreamInputRequest{Event: &pb.StreamInputRequest_Data{Data: &pb.StreamInputRequest_DataEvent{
		Input: &pb.ProcessInput{Input: &pb.ProcessInput_Stdin{Stdin: []byte("two\n")}}}}})
	if _, err := is.CloseAndReceive(); err != nil {
		t.Fatalf("StreamInput: %v", err)
	}
	if _, err := ta.proc.CloseStdin(ctx, connect.NewRequest(&pb.CloseStdinRequest{Process: byTag})); err != nil {
		t.Fatal(err)
	}
	res, _ := collect(stream.Receive, func() *pb.ProcessEvent { return stream.Msg().GetEvent() })
	if res.stdout != "one\ntwo\n" || res.end.GetExitCode() != 0 {
		t.Fatalf("stdout %q end %v, want one/two and exit 0", res.stdout, res.end)
	}
}

func TestBackgroundConnectSignalList(t *testing.T) {
	ta := startAgent(t, agent.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	tag := "ticker"
	req := shell("i=0; while true; do echo tick $i; i=$((i+1)); sleep 0.1; done")
	req.Tag = &tag
	startCtx, stopStart := context.WithCancel(ctx)
	stream, err := ta.proc.Start(startCtx, connect.NewRequest(req))
	if err != nil {
		t.Fatal(err)
	}
	if !stream.Receive() {
		t.Fatalf("no start event: %v", stream.Err())
	}
	pid := stream.Msg().GetEvent().GetStart().GetPid()
	// Drop the starting client: the process must keep running.
	stopStart()
	stream.Close()

	list, err := ta.proc.List(ctx, connect.NewRequest(&pb.ListRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	if got := list.Msg.GetProcesses(); len(got) != 1 || got[0].GetPid() != pid || got[0].GetTag() != tag {
		t.Fatalf("List = %v, want pid %d tag %s", got, pid, tag)
	}

	conn, err := ta.proc.Connect(ctx, connect.NewRequest(&pb.ConnectRequest{
		Process: &pb.ProcessSelector{Selector: &pb.ProcessSelector_Pid{Pid: pid}}}))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if !conn.Receive() || conn.Msg().GetEvent().GetStart().GetPid() != pid {
		t.Fatalf("Connect: want start event with pid %d, err %v", pid, conn.Err())
	}
	sawTick := false
	for !sawTick && conn.Receive() {
		sawTick = strings.Contains(string(conn.Msg().GetEvent().GetData().GetStdout()), "tick")
	}
	if !sawTick {
		t.Fatalf("no output after Connect: %v", conn.Err())
	}
	if _, err := ta.proc.SendSignal(ctx, connect.NewRequest(&pb.SendSignalRequest{
		Process: &pb.ProcessSelector{Selector: &pb.ProcessSelector_Tag{Tag: tag}},
		Signal:  pb.Signal_SIGNAL_SIGKILL,
	})); err != nil {
		t.Fatal(err)
	}
	res, _ := collect(conn.Receive, func() *pb.ProcessEvent { return conn.Msg().GetEvent() })
	if res.end == nil || res.end.GetExited() || res.end.GetStatus() != "signal: killed" {
		t.Fatalf("end = %v, want killed by signal", res.end)
	}
	assertGone(t, ta, pid)
}

// assertGone checks that a finished process leaves List and that Connect
// then answers not_found.
func assertGone(t *testing.T, ta *testAgent, pid uint32) {
	t.Helper()
	ctx := context.Background()
	waitFor(t, func() bool {
		l, err := ta.proc.List(ctx, connect.NewRequest(&pb.ListRequest{}))
		return err == nil && len(l.Msg.GetProcesses()) == 0
	})
	gone, err := ta.proc.Connect(ctx, connect.NewRequest(&pb.ConnectRequest{
		Process: &pb.ProcessSelector{Selector: &pb.ProcessSelector_Pid{Pid: pid}}}))
	if err == nil {
		// Server-stream errors surface on the first Receive.
		for gone.Receive() {
		}
		err = gone.Err()
		gone.Close()
	}
	if connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("Connect to finished process: %v, want not_found", err)
	}
}

func TestKeepaliveHeader(t *testing.T) {
	ta := startAgent(t, agent.Config{})
	req := connect.NewRequest(shell("sleep 1.5; echo done"))
	req.Header().Set("Keepalive-Ping-Interval", "1")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream, err := ta.proc.Start(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	keepalives := 0
	for stream.Receive() {
		if stream.Msg().GetEvent().GetKeepalive() != nil {
			keepalives++
		}
	}
	if keepalives == 0 {
		t.Fatalf("no keepalive during 1.5 s of silence with a 1 s interval (err %v)", stream.Err())
	}
}

func TestConnectTimeoutKillsProcess(t *testing.T) {
	ta := startAgent(t, agent.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	// A client timeout of 500 ms (sent as Connect-Timeout-Ms) must end the
	// process, as envd does, even though it would sleep for a minute.
	timeoutCtx, cancelTimeout := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancelTimeout()
	stream, err := ta.proc.Start(timeoutCtx, connect.NewRequest(shell("sleep 60")))
	if err != nil {
		t.Fatal(err)
	}
	for stream.Receive() {
	}
	stream.Close()
	waitFor(t, func() bool {
		l, err := ta.proc.List(ctx, connect.NewRequest(&pb.ListRequest{}))
		return err == nil && len(l.Msg.GetProcesses()) == 0
	})
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("process outlived its timeout: %v", d)
	}
}

func TestPTY(t *testing.T) {
	ta := startAgent(t, agent.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	req := &pb.StartRequest{
		Process: &pb.ProcessConfig{Cmd: "/bin/sh", Args: []string{"-i"}, Envs: map[string]string{"PS1": "$ "}},
		Pty:     &pb.PTY{Size: &pb.PTY_Size{Cols: 80, Rows: 24}},
	}
	stream, err := ta.proc.Start(ctx, connect.NewRequest(req))
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	if !stream.Receive() {
		t.Fatalf("no start event: %v", stream.Err())
	}
	sel := &pb.ProcessSelector{Selector: &pb.ProcessSelector_Pid{Pid: stream.Msg().GetEvent().GetStart().GetPid()}}
	send := func(s string) {
		t.Helper()
		in := &pb.ProcessInput{Input: &pb.ProcessInput_Pty{Pty: []byte(s)}}
		if _, err := ta.proc.SendInput(ctx, connect.NewRequest(&pb.SendInputRequest{Process: sel, Input: in})); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ta.proc.Update(ctx, connect.NewRequest(&pb.UpdateRequest{
		Process: sel, Pty: &pb.PTY{Size: &pb.PTY_Size{Cols: 100, Rows: 40}}})); err != nil {
		t.Fatal(err)
	}
	send("stty size; tty; echo marker-$((6*7))\n")
	send("exit 5\n")
	res, _ := collect(stream.Receive, func() *pb.ProcessEvent { return stream.Msg().GetEvent() })
	for _, want := range []string{"40 100", "/dev/pts/", "marker-42"} {
		if !strings.Contains(res.pty, want) {
			t.Errorf("pty output %q lacks %q", res.pty, want)
		}
	}
	if res.stdout != "" || res.end.GetExitCode() != 5 {
		t.Errorf("stdout %q end %v, want no stdout and exit 5", res.stdout, res.end)
	}
	_, err = ta.proc.CloseStdin(ctx, connect.NewRequest(&pb.CloseStdinRequest{Process: sel}))
	if connect.CodeOf(err) != connect.CodeNotFound {
		t.Errorf("CloseStdin after exit: %v, want not_found", err)
	}
}

func TestLateSubscriberGetsFutureOutput(t *testing.T) {
	ta := startAgent(t, agent.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	stdin := true
	req := &pb.StartRequest{Process: &pb.ProcessConfig{Cmd: "cat"}, Stdin: &stdin}
	first, err := ta.proc.Start(ctx, connect.NewRequest(req))
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	first.Receive()
	sel := &pb.ProcessSelector{Selector: &pb.ProcessSelector_Pid{Pid: first.Msg().GetEvent().GetStart().GetPid()}}
	second, err := ta.proc.Connect(ctx, connect.NewRequest(&pb.ConnectRequest{Process: sel}))
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	second.Receive() // start event: the subscription is in place
	for i := range 50 {
		in := &pb.ProcessInput{Input: &pb.ProcessInput_Stdin{Stdin: []byte{byte('a' + i%26)}}}
		if _, err := ta.proc.SendInput(ctx, connect.NewRequest(&pb.SendInputRequest{Process: sel, Input: in})); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ta.proc.CloseStdin(ctx, connect.NewRequest(&pb.CloseStdinRequest{Process: sel})); err != nil {
		t.Fatal(err)
	}
	a, _ := collect(first.Receive, func() *pb.ProcessEvent { return first.Msg().GetEvent() })
	b, _ := collect(second.Receive, func() *pb.ProcessEvent { return second.Msg().GetEvent() })
	if len(a.stdout) != 50 || a.stdout != b.stdout || a.end == nil || b.end == nil {
		t.Fatalf("first saw %q (end %v), second %q (end %v); want the same 50 bytes and an end each",
			a.stdout, a.end, b.stdout, b.end)
	}
}

// waitFor polls cond for up to five seconds.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// BenchmarkStartTrue measures one Start round trip (start event to end
// event) for /bin/true over Connect+JSON on loopback.
func BenchmarkStartTrue(b *testing.B) {
	ta := startAgent(b, agent.Config{})
	req := &pb.StartRequest{Process: &pb.ProcessConfig{Cmd: "/bin/true"}}
	for b.Loop() {
		stream, err := ta.proc.Start(context.Background(), connect.NewRequest(req))
		if err != nil {
			b.Fatal(err)
		}
		for stream.Receive() {
		}
		if err := stream.Err(); err != nil {
			b.Fatal(err)
		}
		stream.Close()
	}
}
