package cli

import (
	"fmt"

	"github.com/spf13/cobra"
)

func (a *app) sandboxTimeoutCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "timeout <sandbox-id> <seconds>",
		Short: "Set a sandbox's deadline to now + seconds",
		Long: `Replace the sandbox's deadline with now + seconds. This can shorten it; use
"sandbox refresh" to only ever extend.`,
		Example: `  forkbox sandbox timeout sbx0001 600`,
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			d, err := parseSeconds(args[1])
			if err != nil {
				return err
			}
			if err := a.client().SetTimeout(cmd.Context(), args[0], d); err != nil {
				return err
			}
			return a.done(args[0], fmt.Sprintf("%s now expires in %s", args[0], d))
		},
	}
}
