package integration

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/forkbox/forkbox/client"
	"github.com/forkbox/forkbox/internal/daemon/daemontest"
)

// TestForwarding: a client that knows only node a reaches a sandbox that
// node b runs — the control API (get, pause, connect, kill) and envd
// (commands, files) are forwarded to b; its memory survives a pause and
// resume asked of a. Once b's lease ran out, b's running sandbox is 503
// naming b, then recorded lost (killed, "node lost") — never listed as
// running, its log still read through a — and b, restarted, removes what
// it left.
func TestForwarding(t *testing.T) {
	ctx := daemontest.Context(t)
	a, b := startPair(t, nodeArgs, nodeArgs)
	ca, cb := client.New(a.URL, a.APIKey), client.New(b.URL, a.APIKey)
	// Drained, node a takes no new sandboxes, so the creates sent to b
	// stay there (placement would otherwise pick either); forwarding to b
	// does not depend on a taking new sandboxes.
	if _, err := ca.DrainNode(ctx, "node-a"); err != nil {
		t.Fatal(err)
	}
	onB := create(t, ctx, cb, client.CreateOptions{})
	id := onB.SandboxID
	if info, err := ca.GetSandbox(ctx, id); err != nil || info.ClientID != "node-b" || info.State != "running" {
		t.Fatalf("node b's sandbox through node a: %+v %v", info, err)
	}
	conn := ca.Conn(id, onB.EnvdAccessToken)
	sh(t, ctx, conn, "echo kept > /tmp/f; nohup sleep 1000 >/dev/null 2>&1 &")
	if got := readFile(t, ctx, conn, "/tmp/f"); got != "kept\n" {
		t.Errorf("file read through node a: %q", got)
	}
	if err := ca.Pause(ctx, id); err != nil {
		t.Fatalf("pause through node a: %v", err)
	}
	waitFor(t, 30*time.Second, func() bool { return strings.Contains(b.Log(), "sandbox paused") })
	if _, err := ca.Connect(ctx, id, time.Minute); err != nil {
		t.Fatalf("connect (resume) through node a: %v", err)
	}
	if got := sh(t, ctx, conn, "cat /tmp/f; pgrep -x sleep >/dev/null && echo sleeping"); got != "kept\nsleeping" {
		t.Errorf("after pause and resume through node a: %q, want the file and the process", got)
	}
	if err := ca.KillSandbox(ctx, id); err != nil {
		t.Fatalf("kill through node a: %v", err)
	}
	if _, err := cb.GetSandbox(ctx, id); err == nil {
		t.Errorf("node b still has %s after a kill sent to node a", id)
	}
	lost := create(t, ctx, cb, client.CreateOptions{})
	b.Kill9()
	waitFor(t, 10*time.Second, func() bool { n, err := ca.GetNode(ctx, "node-b"); return err == nil && n.State == client.NodeDead })
	// Dead: 503 naming the node until node a records the sandbox lost
	// (within a heartbeat), then killed with its reason; never running.
	var info *client.SandboxInfo
	waitFor(t, 10*time.Second, func() bool {
		var err error
		info, err = ca.GetSandbox(ctx, lost.SandboxID)
		var e *client.Error
		if asError(err, &e) && (e.Status != http.StatusServiceUnavailable || !strings.Contains(e.Message, "node-b")) {
			t.Fatalf("a dead node's sandbox through node a: %v, want 503 naming node-b or killed", err)
		}
		return err == nil
	})
	if info.State != "killed" || info.KillReason != "node lost" {
		t.Errorf("a dead node's sandbox: %s (%q), want killed: node lost", info.State, info.KillReason)
	}
	if list, _, err := ca.ListSandboxes(ctx, client.ListOptions{}); err != nil || len(list) != 0 {
		t.Errorf("listed after node b died: %+v %v, want none", list, err)
	}
	// Its log is the cluster's: node a reads what b logged of it and
	// why it is gone.
	logs, err := ca.Logs(ctx, lost.SandboxID, client.LogsOptions{})
	if err != nil || !slices.ContainsFunc(logs, func(e client.LogEntry) bool { return e.Message == "sandbox created" }) ||
		!slices.ContainsFunc(logs, func(e client.LogEntry) bool { return e.Message == "sandbox lost with its node" }) {
		t.Errorf("the lost sandbox's log through node a: %+v %v, want its creation and its loss", logs, err)
	}
	// Back, node b finds the sandbox recorded lost and removes what was
	// left of it instead of serving it again.
	b.Restart()
	if info, err := cb.GetSandbox(ctx, lost.SandboxID); err != nil || info.State != "killed" {
		t.Errorf("node b after its restart reports the lost sandbox as %+v, %v", info, err)
	}
	if !strings.Contains(b.Log(), "removing orphan runtime sandbox") {
		t.Errorf("node b did not remove the lost sandbox's container at its restart")
	}
}
