package cli

import (
	"github.com/spf13/cobra"
)

func (a *app) nodeInfoCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "info <node-id>",
		Aliases: []string{"get"},
		Short:   "Show one node",
		Long:    "Show a node's state, URL, capacity, free memory, CPUs, load, version, start and last heartbeat, and when its lease runs out.",
		Example: `  forkbox node info node-b --json`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			n, err := a.client().GetNode(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return a.printNode(n)
		},
	}
}
