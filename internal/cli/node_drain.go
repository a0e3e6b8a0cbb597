package cli

import (
	"fmt"

	"github.com/spf13/cobra"
)

// nodeDrainCmd is "node drain" (drain true) or "node undrain".
func (a *app) nodeDrainCmd(drain bool) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "drain <node-id>",
		Short: "Stop a node from taking new sandboxes",
		Long: `Drain a node: creates, forks and clones sent to it answer 503 until it is
undrained; its sandboxes keep running, and can be paused, resumed and killed.
The drain is kept in the records: it outlasts the node's restarts.`,
		Example: `  forkbox node drain node-b`,
		Args:    cobra.ExactArgs(1),
	}
	if !drain {
		cmd.Use, cmd.Short = "undrain <node-id>", "Let a drained node take new sandboxes again"
		cmd.Long, cmd.Example = "Undrain a node: it takes new sandboxes again.", `  forkbox node undrain node-b`
	}
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		c := a.client()
		call := c.DrainNode
		if !drain {
			call = c.UndrainNode
		}
		n, err := call(cmd.Context(), args[0])
		if err != nil {
			return err
		}
		if a.json {
			return a.printJSON(n)
		}
		_, err = fmt.Fprintf(a.stdout, "%s %s\n", n.NodeID, n.State)
		return err
	}
	return cmd
}
