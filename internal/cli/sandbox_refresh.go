package cli

import (
	"fmt"

	"github.com/spf13/cobra"
)

func (a *app) sandboxRefreshCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "refresh <sandbox-id> <seconds>",
		Short: "Keep a sandbox alive for at least seconds more",
		Long: `Extend the sandbox's deadline to now + seconds unless it is already later.
The server accepts at most 3600 seconds.`,
		Example: `  forkbox sandbox refresh sbx0001 300`,
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			d, err := parseSeconds(args[1])
			if err != nil {
				return err
			}
			if err := a.client().Refresh(cmd.Context(), args[0], d); err != nil {
				return err
			}
			return a.done(args[0], fmt.Sprintf("%s kept alive for at least %s", args[0], d))
		},
	}
}
