package cli

import (
	"fmt"

	"github.com/spf13/cobra"
)

func (a *app) secretDeleteCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "delete <secret-id-or-name>",
		Aliases: []string{"rm"},
		Short:   "Delete a secret and all its versions",
		Long: `Delete a secret. A sandbox whose rules still name it gets a 502 from the
egress proxy for each matching request (the request is not sent), listed in
its network status and log.`,
		Example: `  forkbox secret delete github-token`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := a.client().DeleteSecret(cmd.Context(), args[0]); err != nil {
				return err
			}
			if a.json {
				return a.printJSON(map[string]any{"secret": args[0], "deleted": true})
			}
			_, err := fmt.Fprintf(a.stdout, "deleted %s\n", args[0])
			return err
		},
	}
}
