package cli

import (
	"fmt"

	"github.com/spf13/cobra"
)

func (a *app) snapshotDeleteCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "delete <snapshot-id>",
		Aliases: []string{"rm"},
		Short:   "Delete a snapshot",
		Long:    "Delete a snapshot. It fails while sandboxes started from it still need it.",
		Example: `  forkbox snapshot delete snap0002`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := a.client().DeleteSnapshot(cmd.Context(), args[0]); err != nil {
				return err
			}
			if a.json {
				return a.printJSON(map[string]any{"snapshotID": args[0], "deleted": true})
			}
			_, err := fmt.Fprintf(a.stdout, "deleted %s\n", args[0])
			return err
		},
	}
}
