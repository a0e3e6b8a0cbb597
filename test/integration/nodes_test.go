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
// URLs (`forkbox node list --json`, asked of either); draining node b
// through node a makes creates on b answer 503 naming b while a still
// creates; undrained, b creates again; b killed with -9 is dead once its
// lease ran out, and alive again once restarted.
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
	_, err := cb.CreateSandbox(ctx, client.CreateOptions{TemplateID: "base"})
	var e *client.Error
	if !asError(err, &e) || e.Status != http.StatusServiceUnavailable || !strings.Contains(e.Message, "node node-b is draining") {
		t.Fatalf("create on drained node-b: %v, want 503 naming node-b", err)
	}
	onA := create(t, ctx, ca, client.CreateOptions{})
	if _, err := cb.UndrainNode(ctx, "node-b"); err != nil {
		t.Fatal(err)
	}
	onB := create(t, ctx, cb, client.CreateOptions{})
	if got := sh(t, ctx, onB.Conn(), "echo on-b"); got != "on-b" {
		t.Errorf("sandbox on node-b answers %q", got)
	}
	for _, k := range []struct {
		c  *client.Client
		id string
	}{{ca, onA.SandboxID}, {cb, onB.SandboxID}} {
		if err := k.c.KillSandbox(ctx, k.id); err != nil {
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
