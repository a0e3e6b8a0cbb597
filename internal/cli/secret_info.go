package cli

import (
	"github.com/spf13/cobra"
)

func (a *app) secretInfoCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "info <secret-id-or-name>",
		Aliases: []string{"get"},
		Short:   "Show a secret's metadata (never its value)",
		Long:    "Show a secret's id, name, current version, metadata and times. No command shows a value.",
		Example: `  forkbox secret info github-token --json`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := a.client().GetSecret(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return a.printSecret(s)
		},
	}
}
