package cli

import (
	"github.com/spf13/cobra"
)

func (a *app) sandboxPauseCmd() *cobra.Command {
	var filesOnly bool
	cmd := &cobra.Command{
		Use:   "pause <sandbox-id>",
		Short: "Persist a sandbox's files and memory and stop it",
		Long: `Pause saves the sandbox's whole state (filesystem and memory) to disk and
releases its CPU and memory. "sandbox resume" continues exactly there.
With --files-only only the files are kept (cheaper to store): the resume
cold-boots the sandbox with them — files kept, processes gone.`,
		Example: `  forkbox sandbox pause sbx0001
  forkbox sandbox pause sbx0001 --files-only`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			pause := a.client().Pause
			if filesOnly {
				pause = a.client().PauseFilesystem
			}
			if err := pause(cmd.Context(), args[0]); err != nil {
				return err
			}
			return a.done(args[0], "paused "+args[0])
		},
	}
	cmd.Flags().BoolVar(&filesOnly, "files-only", false, "keep only the filesystem, not the memory (the resume cold-boots)")
	return cmd
}
