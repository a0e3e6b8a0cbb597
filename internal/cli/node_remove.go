package cli

import (
	"fmt"

	"github.com/spf13/cobra"
)

// nodeRemoveCmd is "node remove".
func (a *app) nodeRemoveCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "remove <node-id>",
		Aliases: []string{"rm"},
		Short:   "Remove a dead node from the cluster's records",
		Long: `Remove a node retired for good, so listings and metrics stop counting it.
Only a dead node (its lease ran out) can be removed, and only once none of its
sandboxes is recorded running: a node killed is recorded dead within two
leases and its running sandboxes lost; one that stopped cleanly means to come
back for its sandboxes, so start it and kill them first. Paused sandboxes do
not hold a removal (with an object store another node resumes them). A
removed node that starts again registers anew.`,
		Example: `  forkbox node remove node-c`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := a.client().RemoveNode(cmd.Context(), args[0]); err != nil {
				return err
			}
			if a.json {
				return a.printJSON(map[string]any{"nodeID": args[0], "removed": true})
			}
			_, err := fmt.Fprintf(a.stdout, "removed %s\n", args[0])
			return err
		},
	}
}
