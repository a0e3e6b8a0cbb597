package cli

import (
	"fmt"

	"github.com/spf13/cobra"
)

func (a *app) sandboxRollbackCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "rollback <sandbox-id> <snapshot-id>",
		Short: "Restore a sandbox in place to one of its snapshots",
		Long: `Rollback resets the sandbox's filesystem and memory to the snapshot and keeps
its id; connections into the sandbox are re-established.`,
		Example: `  forkbox snapshot create sbx0001 --name before
  forkbox sandbox rollback sbx0001 snap0002`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			res, err := a.client().Rollback(cmd.Context(), args[0], args[1])
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(res)
			}
			_, err = fmt.Fprintf(a.stdout, "rolled %s back to %s (%s)\n", res.SandboxID, res.SnapshotID, orDash(res.Status))
			return err
		},
	}
}
