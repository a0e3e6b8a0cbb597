package cli

import (
	"github.com/spf13/cobra"

	"github.com/forkbox/forkbox/client"
)

func (a *app) snapshotListCmd() *cobra.Command {
	var o client.SnapshotListOptions
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List snapshots",
		Long:    "List every snapshot (all pages), optionally only those of one sandbox or with one name.",
		Example: `  forkbox snapshot list --sandbox sbx0001`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c := a.client()
			var list []client.SnapshotInfo
			for {
				page, next, err := c.ListSnapshots(cmd.Context(), o)
				if err != nil {
					return err
				}
				list = append(list, page...)
				if next == "" {
					break
				}
				o.NextToken = next
			}
			if a.json {
				return a.printJSON(list)
			}
			return a.printSnapshots(list)
		},
	}
	cmd.Flags().StringVar(&o.SandboxID, "sandbox", "", "only snapshots taken from this sandbox")
	cmd.Flags().StringVar(&o.Name, "name", "", "only snapshots with this name or id")
	return cmd
}
