package integration

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/forkbox/forkbox/client"
	"github.com/forkbox/forkbox/internal/daemon/daemontest"
	"github.com/forkbox/forkbox/internal/store/pgtest"
)

// TestForwarding: a client that knows only node a reaches a sandbox that
// node b runs — the control API (get, pause, connect, kill) and envd
// (commands, files) are forwarded to b; its memory survives a pause and
// resume asked of a. Once b's lease ran out, a answers 503 naming b for
// b's sandbox instead of a silent 404.
func TestForwarding(t *testing.T) {
	ctx := daemontest.Context(t)
	url := pgtest.Start(t).NewDatabase(t)
	var a, b *daemontest.Daemon
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); a = startOnDatabase(t, url, "node-a", 0, nodeArgs...) }()
	go func() { defer wg.Done(); b = startOnDatabase(t, url, "node-b", secondIndex(), nodeArgs...) }()
	wg.Wait()
	if a == nil || b == nil {
		t.Fatal("a daemon did not start")
	}
	ca, cb := client.New(a.URL, a.APIKey), client.New(b.URL, a.APIKey)
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
	_, err := ca.GetSandbox(ctx, lost.SandboxID)
	var e *client.Error
	if !asError(err, &e) || e.Status != http.StatusServiceUnavailable || !strings.Contains(e.Message, "node-b") {
		t.Errorf("a dead node's sandbox through node a: %v, want 503 naming node-b", err)
	}
	b.Restart() // its clean stop at the end of the test takes what it left
}
