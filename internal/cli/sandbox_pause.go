package cli

import (
	"github.com/spf13/cobra"
)

func (a *app) sandboxPauseCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "pause <sandbox-id>",
		Short: "Persist a sandbox's files and memory and stop it",
		Long: `Pause saves the sandbox's whole state (filesystem and memory) to disk and
releases its CPU and memory. "sandbox resume" continues exactly there.`,
		Example: `  forkbox sandbox pause sbx0001`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := a.client().Pause(cmd.Context(), args[0]); err != nil {
				return err
			}
			return a.done(args[0], "paused "+args[0])
		},
	}
}
