package cli

import (
	"github.com/spf13/cobra"
)

func (a *app) nodeListCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List the nodes of the cluster",
		Long: `List every node the records hold, dead ones too, by id, with its state
(alive, draining, dead), URL, sandboxes running and its capacity, free memory,
CPUs and last heartbeat. * marks the node that answered.`,
		Example: `  forkbox node list
  forkbox node list --json --api-url http://node-a:3000`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			list, err := a.client().ListNodes(cmd.Context())
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(list)
			}
			return a.printNodes(list)
		},
	}
}
