package cli

import (
	"github.com/spf13/cobra"

	"github.com/forkbox/forkbox/client"
)

func (a *app) snapshotCreateCmd() *cobra.Command {
	var name string
	cmd := &cobra.Command{
		Use:     "create <sandbox-id>",
		Short:   "Snapshot a running sandbox",
		Long:    "Capture the sandbox's files and memory; the sandbox is suspended only briefly and keeps running.",
		Example: `  forkbox snapshot create sbx0001 --name after-install`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := a.client().Snapshot(cmd.Context(), args[0], name)
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(s)
			}
			if s.SandboxID == "" {
				s.SandboxID = args[0]
			}
			return a.printSnapshots([]client.SnapshotInfo{*s})
		},
	}
	cmd.Flags().StringVarP(&name, "name", "n", "", "name of the snapshot")
	return cmd
}
