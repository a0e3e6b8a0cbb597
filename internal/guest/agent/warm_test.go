package agent_test

import (
	"context"
	"net/http"
	"testing"

	"connectrpc.com/connect"

	pb "github.com/forkbox/forkbox/api/gen/process"
	"github.com/forkbox/forkbox/internal/guest/agent"
)

// TestWarm: POST /forkbox/warm starts and reaps a process and answers 204
// once it ended; the process is no command (not listed), and commands run
// as before afterwards.
func TestWarm(t *testing.T) {
	ta := startAgent(t, agent.Config{})
	for range 2 {
		ta.warm(t)
	}
	list, err := ta.proc.List(context.Background(), connect.NewRequest(&pb.ListRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(list.Msg.GetProcesses()); n != 0 {
		t.Errorf("processes listed after warming: %d", n)
	}
	if r := ta.runProcess(t, connect.NewRequest(shell("echo after"))); r.stdout != "after\n" || r.end.GetExitCode() != 0 {
		t.Errorf("command after warming: %+v", r)
	}
}

// warm posts /forkbox/warm to ta and fails unless it answers 204.
func (ta *testAgent) warm(t *testing.T) {
	t.Helper()
	resp, err := ta.http.Post(ta.url+"/forkbox/warm", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("warm: %s", resp.Status)
	}
}
