package cli

import (
	"github.com/spf13/cobra"

	"github.com/forkbox/forkbox/client"
)

func (a *app) secretListCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List secrets (names and versions, never values)",
		Long:    "List every secret (all pages) in creation order.",
		Example: `  forkbox secret list --json`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c := a.client()
			list := []client.Secret{}
			next := ""
			for {
				page, tok, err := c.ListSecrets(cmd.Context(), 0, next)
				if err != nil {
					return err
				}
				list = append(list, page...)
				if tok == "" {
					break
				}
				next = tok
			}
			if a.json {
				return a.printJSON(list)
			}
			return a.printSecrets(list)
		},
	}
}
