package cli

import (
	"strings"

	"github.com/spf13/cobra"

	"github.com/forkbox/forkbox/client"
)

// snapshotCmd groups the snapshot verbs.
func (a *app) snapshotCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "snapshot",
		Aliases: []string{"snapshots", "snap"},
		Short:   "Capture, list and delete snapshots",
		Long: `A snapshot is a sandbox's whole state (files and memory) saved as a reusable
image. A snapshot id works anywhere a template id does, and it outlives the
sandbox it was taken from.`,
		Example: `  forkbox snapshot create sbx0001 --name ready
  forkbox sandbox create --template snap0002`,
	}
	cmd.AddCommand(a.snapshotCreateCmd(), a.snapshotListCmd(), a.snapshotDeleteCmd())
	return cmd
}

func (a *app) printSnapshots(list []client.SnapshotInfo) error {
	rows := make([][]string, 0, len(list))
	for _, s := range list {
		rows = append(rows, []string{s.SnapshotID, orDash(strings.Join(s.Names, ",")), orDash(s.SandboxID), formatTime(s.CreatedAt)})
	}
	return table(a.stdout, []string{"SNAPSHOT ID", "NAMES", "SANDBOX", "CREATED"}, rows)
}
