package cli

import (
	"strings"
	"testing"

	"github.com/forkbox/forkbox/client"
	"github.com/forkbox/forkbox/client/clienttest"
)

// TestNodeVerbs: list (table and --json, this node marked, a dead node
// shown dead), info, drain (then sandbox create fails naming the node),
// undrain, remove (a dead node only), and a non-zero exit for an unknown
// node.
func TestNodeVerbs(t *testing.T) {
	srv := clienttest.NewServer(t)
	srv.AddNode("z-node", "http://10.0.0.9:3000", false)
	list := mustJSON[[]client.Node](t, srv, "node", "list")
	if len(list) != 2 || list[0].NodeID != clienttest.NodeID || list[0].State != "alive" || list[1].State != "dead" {
		t.Fatalf("list %+v", list)
	}
	human := runCLI(t, srv, nil, "node", "list")
	if human.code != 0 || !strings.Contains(human.stdout, "NODE ID") || !strings.Contains(human.stdout, clienttest.NodeID+" *") ||
		!strings.Contains(human.stdout, "dead") || !strings.Contains(human.stdout, "0/100") {
		t.Errorf("list:\n%s", human.stdout)
	}
	if n := mustJSON[client.Node](t, srv, "node", "drain", clienttest.NodeID); n.State != "draining" {
		t.Errorf("drain %+v", n)
	}
	r := runCLI(t, srv, nil, "sandbox", "create")
	if r.code == 0 || !strings.Contains(r.stderr, "node "+clienttest.NodeID+" is draining") {
		t.Errorf("create on a drained node: %d %s", r.code, r.stderr)
	}
	info := runCLI(t, srv, nil, "node", "info", clienttest.NodeID)
	if info.code != 0 || !strings.Contains(info.stdout, "draining") || !strings.Contains(info.stdout, "4096 MiB") {
		t.Errorf("info:\n%s %s", info.stdout, info.stderr)
	}
	if r := runCLI(t, srv, nil, "node", "undrain", clienttest.NodeID); r.code != 0 || r.stdout != clienttest.NodeID+" alive\n" {
		t.Errorf("undrain: %d %q %s", r.code, r.stdout, r.stderr)
	}
	if r := runCLI(t, srv, nil, "sandbox", "create"); r.code != 0 {
		t.Errorf("create after undrain: %s", r.stderr)
	}
	if r := runCLI(t, srv, nil, "node", "remove", clienttest.NodeID); r.code == 0 || !strings.Contains(r.stderr, "only a dead node can be removed") {
		t.Errorf("remove a live node: %d %s", r.code, r.stderr)
	}
	if got := mustJSON[map[string]any](t, srv, "node", "remove", "z-node"); got["nodeID"] != "z-node" || got["removed"] != true {
		t.Errorf("remove --json: %v", got)
	}
	if list := mustJSON[[]client.Node](t, srv, "node", "list"); len(list) != 1 {
		t.Errorf("list after the removal: %+v", list)
	}
	for _, verb := range []string{"info", "drain", "undrain", "remove"} {
		if r := runCLI(t, srv, nil, "node", verb, "nope"); r.code == 0 || !strings.Contains(r.stderr, "nope") {
			t.Errorf("node %s nope: %d %s", verb, r.code, r.stderr)
		}
	}
}
