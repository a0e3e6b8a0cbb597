package cli

import (
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/forkbox/forkbox/client"
)

// nodeCmd groups the node verbs.
func (a *app) nodeCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "node",
		Aliases: []string{"nodes"},
		Short:   "List the daemons of a cluster, drain them, remove dead ones",
		Long: `A node is one forkbox daemon. Daemons sharing a --database form a cluster:
each registers itself, renews its lease every 2 seconds with its free memory,
CPUs and sandboxes, and counts as dead once the lease (10 seconds) runs out.
A single daemon on SQLite is a cluster of one. A drained node takes no new
sandboxes (creates, forks and clones on it answer 503); the ones it runs keep
running. Any node can be asked about, or drain, any other. A dead node retired
for good can be removed from the records.`,
		Example: `  forkbox node list
  forkbox node drain node-b
  forkbox node info node-b --json
  forkbox node undrain node-b
  forkbox node remove node-c`,
	}
	cmd.AddCommand(a.nodeListCmd(), a.nodeInfoCmd(), a.nodeDrainCmd(true), a.nodeDrainCmd(false), a.nodeRemoveCmd())
	return cmd
}

func (a *app) printNodes(list []client.Node) error {
	rows := make([][]string, 0, len(list))
	for _, n := range list {
		id := n.NodeID
		if n.Self {
			id += " *"
		}
		rows = append(rows, []string{id, n.State, n.URL, fmt.Sprintf("%d/%d", n.Running, n.Capacity),
			strconv.FormatInt(n.FreeMemoryMiB, 10), strconv.Itoa(n.CPUs), formatTime(n.HeartbeatAt)})
	}
	return table(a.stdout, []string{"NODE ID", "STATE", "URL", "SANDBOXES", "FREE MIB", "CPUS", "HEARTBEAT"}, rows)
}

func (a *app) printNode(n *client.Node) error {
	if a.json {
		return a.printJSON(n)
	}
	return fields(a.stdout, [][2]string{
		{"Node", n.NodeID}, {"State", n.State}, {"URL", n.URL}, {"Self", strconv.FormatBool(n.Self)},
		{"Sandboxes", fmt.Sprintf("%d of %d", n.Running, n.Capacity)},
		{"Free memory", fmt.Sprintf("%d MiB", n.FreeMemoryMiB)},
		{"CPUs", fmt.Sprintf("%d (load %.2f)", n.CPUs, n.Load1)}, {"Version", orDash(n.Version)},
		{"Started", formatTime(n.StartedAt)}, {"Heartbeat", formatTime(n.HeartbeatAt)}, {"Lease until", formatTime(n.LeaseUntil)},
	})
}
