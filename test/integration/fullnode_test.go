package integration

import (
	"strings"
	"testing"
	"time"

	"github.com/forkbox/forkbox/client"
	"github.com/forkbox/forkbox/internal/daemon/daemontest"
)

// TestResumeOnFullNodeMoves: a resume asked of a node that is full
// (--max-sandboxes reached) hands the paused sandbox to the node
// placement picks and is forwarded there: the sandbox resumes on the
// other node with its files and processes, and the client sees one answer.
func TestResumeOnFullNodeMoves(t *testing.T) {
	ctx := daemontest.Context(t)
	a, _ := startSharedPair(t, []string{"--max-sandboxes", "1"})
	ca := client.New(a.URL, a.APIKey)
	if _, err := ca.DrainNode(ctx, "node-b"); err != nil {
		t.Fatal(err)
	}
	sb1 := create(t, ctx, ca, client.CreateOptions{})
	conn1 := ca.Conn(sb1.SandboxID, sb1.EnvdAccessToken)
	sh(t, ctx, conn1, "echo full > /tmp/f; nohup sleep 1011 >/dev/null 2>&1 &")
	pause(t, ctx, ca, a, sb1.SandboxID)
	sb2 := create(t, ctx, ca, client.CreateOptions{}) // node a is full now
	for _, id := range []string{sb1.SandboxID, sb2.SandboxID} {
		if info, err := ca.GetSandbox(ctx, id); err != nil || info.ClientID != "node-a" {
			t.Fatalf("%s: %+v, %v; want it on node-a", id, info, err)
		}
	}
	if _, err := ca.UndrainNode(ctx, "node-b"); err != nil {
		t.Fatal(err)
	}
	if _, err := ca.Connect(ctx, sb1.SandboxID, time.Minute); err != nil {
		t.Fatalf("resume asked of the full node: %v", err)
	}
	if info, err := ca.GetSandbox(ctx, sb1.SandboxID); err != nil || info.ClientID != "node-b" || info.State != "running" {
		t.Fatalf("after the resume: %+v, %v; want it running on node-b", info, err)
	}
	checkKept(t, ctx, conn1, "full", "1011")
	if !strings.Contains(a.Log(), "this node is full; its paused sandbox resumes on another") {
		t.Error("node a did not log the move")
	}

	// Data-plane traffic for an auto-resume sandbox paused on full node a
	// resumes it on b too: sb3 is paused on a (b drained, sb2 paused to
	// make room), then sb2 resumes there and fills a again.
	if _, err := ca.DrainNode(ctx, "node-b"); err != nil {
		t.Fatal(err)
	}
	pause(t, ctx, ca, a, sb2.SandboxID)
	sb3 := create(t, ctx, ca, client.CreateOptions{AutoResume: true, AutoPause: true})
	conn3 := ca.Conn(sb3.SandboxID, sb3.EnvdAccessToken)
	sh(t, ctx, conn3, "echo woken > /tmp/f; nohup sleep 1012 >/dev/null 2>&1 &")
	pause(t, ctx, ca, a, sb3.SandboxID)
	if _, err := ca.Connect(ctx, sb2.SandboxID, time.Minute); err != nil {
		t.Fatalf("resume sb2 on node a: %v", err)
	}
	if _, err := ca.UndrainNode(ctx, "node-b"); err != nil {
		t.Fatal(err)
	}
	checkKept(t, ctx, conn3, "woken", "1012") // traffic through node a
	if info, err := ca.GetSandbox(ctx, sb3.SandboxID); err != nil || info.ClientID != "node-b" || info.State != "running" {
		t.Fatalf("after traffic woke it: %+v, %v; want it running on node-b", info, err)
	}
}
