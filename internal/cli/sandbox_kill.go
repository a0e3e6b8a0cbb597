package cli

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"
)

func (a *app) sandboxKillCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "kill <sandbox-id>...",
		Aliases: []string{"rm", "delete"},
		Short:   "Kill sandboxes, running or paused",
		Long:    "Kill one or more sandboxes and release their resources. Snapshots taken from them are kept.",
		Example: `  forkbox sandbox kill sbx0001 sbx0002`,
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c := a.client()
			type result struct {
				SandboxID string `json:"sandboxID"`
				Killed    bool   `json:"killed"`
				Error     string `json:"error,omitempty"`
			}
			var results []result
			var errs []error
			for _, id := range args {
				err := c.KillSandbox(cmd.Context(), id)
				r := result{SandboxID: id, Killed: err == nil}
				if err != nil {
					r.Error = err.Error()
					errs = append(errs, fmt.Errorf("kill %s: %w", id, err))
				} else if !a.json {
					fmt.Fprintf(a.stdout, "killed %s\n", id)
				}
				results = append(results, r)
			}
			if a.json {
				if err := a.printJSON(results); err != nil {
					return err
				}
			}
			return errors.Join(errs...)
		},
	}
}
