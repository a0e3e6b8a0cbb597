package chaos

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/forkbox/forkbox/client"
	"github.com/forkbox/forkbox/internal/daemon/daemontest"
)

// node is one daemon of a run: the only one of TestChaos, or one node of
// TestChaosCluster's cluster.
type node struct {
	// id is the daemon's --node-id (a sandbox's clientID); "" for the
	// single daemon of TestChaos, which owns every sandbox.
	id string
	// index is its --network-index: it names its firewall table, links,
	// namespaces and cgroup parent.
	index int
	d     *daemontest.Daemon
	c     *client.Client
}

// String names the node in logs.
func (n *node) String() string {
	if n.id == "" {
		return "the daemon"
	}
	return n.id
}

// api is the client the run lists and quiesces through: the first node's
// (every node of a cluster lists the whole cluster).
func (r *run) api() *client.Client { return r.nodes[0].c }

// anyNode draws the node an operation or a fault goes to; with one node
// it draws nothing, so TestChaos's seeds replay its choices as before.
func (r *run) anyNode() *node {
	if len(r.nodes) == 1 {
		return r.nodes[0]
	}
	return r.nodes[r.rng.IntN(len(r.nodes))]
}

// connect makes the client of node n just (re)started.
func (r *run) connect(n *node) {
	n.c = client.New(n.d.URL, n.d.APIKey)
	r.pids = append(r.pids, n.d.Pid())
}

// ownerOf is the node that runs sandbox sb (by its clientID), nil if no
// node of the run has that id.
func (r *run) ownerOf(sb client.SandboxInfo) *node {
	if len(r.nodes) == 1 {
		return r.nodes[0]
	}
	for _, n := range r.nodes {
		if n.id == sb.ClientID {
			return n
		}
	}
	return nil
}

// eachNode runs f for every node at once (starting and stopping daemons
// is slow) and waits.
func (r *run) eachNode(f func(n *node)) {
	var wg sync.WaitGroup
	for _, n := range r.nodes {
		wg.Go(func() { f(n) })
	}
	wg.Wait()
}

// terminateAll stops every node with SIGTERM, as an operator does.
func (r *run) terminateAll() { r.eachNode(func(n *node) { n.d.Terminate() }) }

// restartAll starts every node again and connects to it.
func (r *run) restartAll() {
	r.eachNode(func(n *node) { n.d.Restart() })
	for _, n := range r.nodes {
		r.connect(n)
	}
}

// nodeErrors returns every node's error-level log lines, by node.
func (r *run) nodeErrors() string {
	var out string
	for _, n := range r.nodes {
		out += fmt.Sprintf("%s:\n%s\n", n, daemonErrors(n.d.DataDir))
	}
	return out
}

// errorf fails the test and keeps the message for traceFailures.
func (r *run) errorf(format string, args ...any) {
	r.t.Helper()
	msg := fmt.Sprintf(format, args...)
	r.t.Error(msg)
	r.failures = append(r.failures, msg)
}

// sandboxID matches sandbox and container ids in messages and logs.
var sandboxID = regexp.MustCompile(`\b[a-z0-9]{20}\b`)

// traceFailures logs, for each sandbox or container id the failures since
// the last call name, the lines of every node's log (all its lives) that
// name it: a leak's story, as a test's temporary data dirs are gone once
// it ends.
func (r *run) traceFailures() {
	ids := map[string]bool{}
	for _, f := range r.failures {
		for _, id := range sandboxID.FindAllString(f, -1) {
			ids[id] = true
		}
	}
	r.failures = nil
	for _, id := range slices.Sorted(maps.Keys(ids)) {
		for _, n := range r.nodes {
			b, _ := os.ReadFile(filepath.Join(n.d.DataDir, "daemon.log"))
			var lines []string
			for line := range strings.Lines(string(b)) {
				if strings.Contains(line, id) && !strings.Contains(line, "msg=\"http request\" method=GET") {
					lines = append(lines, strings.TrimRight(line, "\n"))
				}
			}
			if len(lines) > maxTrace {
				lines = append([]string{"…"}, lines[len(lines)-maxTrace:]...)
			}
			if len(lines) > 0 {
				r.t.Logf("%s in %s's log:\n%s", id, n, strings.Join(lines, "\n"))
			}
		}
	}
}

// maxTrace bounds the lines traceFailures logs per id and node.
const maxTrace = 40
