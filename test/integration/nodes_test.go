package integration

import (
	"context"
	"encoding/json"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/forkbox/forkbox/client"
	"github.com/forkbox/forkbox/internal/daemon/daemontest"
)

// nodeArgs shorten the registry's heartbeat and lease so a killed node is
// dead within seconds.
var nodeArgs = []string{"--node-heartbeat", "200ms", "--node-lease", "2s", "--pool-size", "0", "--standby", "0"}

// TestNodes: two daemons on one PostgreSQL see each other alive at their
// URLs (`forkbox node list --json`, asked of either); a create sent to a
// drained node is placed on the other, and with both drained answers 503;
// undrained, creates go to the node with the most room, and a burst sent
// to one node spreads over both; b killed with -9 is dead once its lease
// ran out, and alive again once restarted.
func TestNodes(t *testing.T) {
	ctx := daemontest.Context(t)
	a, b := startPair(t, nodeArgs, nodeArgs)
	for _, d := range []*daemontest.Daemon{a, b} {
		nodes := nodeList(t, ctx, d)
		if len(nodes) != 2 || nodes[0].NodeID != "node-a" || nodes[1].NodeID != "node-b" {
			t.Fatalf("node list on %s: %+v", d.URL, nodes)
		}
		for i, want := range []*daemontest.Daemon{a, b} {
			if n := nodes[i]; n.State != client.NodeAlive || n.URL != want.URL || n.Self != (want == d) || n.CPUs == 0 || n.FreeMemoryMiB == 0 {
				t.Errorf("node list on %s: %+v, want alive at %s", d.URL, n, want.URL)
			}
		}
	}
	waitNodeMetrics(t, ctx, a, 2, 0)
	if _, text := scrape(t, ctx, a.URL, a.APIKey); metric(text, `forkbox_cluster_node_sandboxes{node="node-b",state="alive"}`) != 0 ||
		!strings.Contains(text, `forkbox_cluster_node_free_memory_bytes{node="node-a",state="alive"}`) {
		t.Errorf("per-node gauges missing from node a's /metrics")
	}
	ca, cb := client.New(a.URL, a.APIKey), client.New(b.URL, a.APIKey)
	if n, err := ca.DrainNode(ctx, "node-b"); err != nil || n.State != client.NodeDraining {
		t.Fatalf("drain node-b through node-a: %+v %v", n, err)
	}
	// A create of a template every node holds, sent to the drained node
	// b, is placed on node a; with every node drained, nothing takes it.
	placed := create(t, ctx, cb, client.CreateOptions{})
	if info, err := ca.GetSandbox(ctx, placed.SandboxID); err != nil || info.ClientID != "node-a" {
		t.Errorf("a create sent to drained node-b runs on %+v (%v), want node-a", info, err)
	}
	if _, err := ca.DrainNode(ctx, "node-a"); err != nil {
		t.Fatal(err)
	}
	_, err := cb.CreateSandbox(ctx, client.CreateOptions{TemplateID: "base"})
	var e *client.Error
	if !asError(err, &e) || e.Status != http.StatusServiceUnavailable || !strings.Contains(e.Message, "draining") {
		t.Fatalf("create with every node drained: %v, want 503", err)
	}
	if _, err := ca.UndrainNode(ctx, "node-a"); err != nil {
		t.Fatal(err)
	}
	onA := create(t, ctx, ca, client.CreateOptions{})
	if _, err := cb.UndrainNode(ctx, "node-b"); err != nil {
		t.Fatal(err)
	}
	onB := create(t, ctx, cb, client.CreateOptions{})
	if info, err := cb.GetSandbox(ctx, onB.SandboxID); err != nil || info.ClientID != "node-b" {
		t.Errorf("a create sent to node-b, which runs fewer, runs on %+v (%v)", info, err)
	}
	if got := sh(t, ctx, onB.Conn(), "echo on-b"); got != "on-b" {
		t.Errorf("sandbox on node-b answers %q", got)
	}
	// A burst sent to one node spreads over both.
	ids := []string{placed.SandboxID, onA.SandboxID, onB.SandboxID}
	perNode := map[string]int{}
	for range 4 {
		sb := create(t, ctx, ca, client.CreateOptions{})
		info, err := ca.GetSandbox(ctx, sb.SandboxID)
		if err != nil {
			t.Fatal(err)
		}
		perNode[info.ClientID]++
		ids = append(ids, sb.SandboxID)
	}
	if perNode["node-a"] == 0 || perNode["node-b"] == 0 {
		t.Errorf("4 creates sent to node-a went to %v, want both nodes", perNode)
	}
	for _, id := range ids {
		if err := ca.KillSandbox(ctx, id); err != nil { // forwarded to its node
			t.Error(err)
		}
	}
	killed := time.Now()
	b.Kill9()
	waitFor(t, 10*time.Second, func() bool { n, err := ca.GetNode(ctx, "node-b"); return err == nil && n.State == client.NodeDead })
	if d := time.Since(killed); d < time.Second {
		t.Errorf("node-b dead %v after the kill, before its 2 s lease could run out", d)
	}
	if n, err := ca.GetNode(ctx, "node-a"); err != nil || n.State != client.NodeAlive {
		t.Errorf("node-a after node-b's death: %+v %v", n, err)
	}
	waitNodeMetrics(t, ctx, a, 1, 1)
	// Restarted, b registers again (and its clean stop at the end of the
	// test takes what it left).
	b.Restart()
	if n, err := ca.GetNode(ctx, "node-b"); err != nil || n.State != client.NodeAlive {
		t.Errorf("node-b after its restart: %+v %v", n, err)
	}
}

// nodeList runs the built `forkbox node list --json` against d.
func nodeList(t *testing.T, ctx context.Context, d *daemontest.Daemon) []client.Node {
	t.Helper()
	cmd := exec.CommandContext(ctx, filepath.Join(d.Bin, "forkbox"), "node", "list", "--json")
	cmd.Env = d.Env()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("forkbox node list: %v %s", err, out)
	}
	var nodes []client.Node
	if err := json.Unmarshal(out, &nodes); err != nil {
		t.Fatalf("forkbox node list: %v in %s", err, out)
	}
	return nodes
}

// waitNodeMetrics waits until d's forkbox_cluster_nodes reports alive and
// dead nodes (it counts from d's last heartbeat, 200 ms at most ago).
func waitNodeMetrics(t *testing.T, ctx context.Context, d *daemontest.Daemon, alive, dead float64) {
	t.Helper()
	waitFor(t, 5*time.Second, func() bool {
		_, text := scrape(t, ctx, d.URL, d.APIKey)
		return metric(text, `forkbox_cluster_nodes{state="alive"}`) == alive && metric(text, `forkbox_cluster_nodes{state="dead"}`) == dead
	})
}
