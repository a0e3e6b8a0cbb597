package cli

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/forkbox/forkbox/client"
)

func (a *app) sandboxForkCmd() *cobra.Command {
	var count, timeout int
	cmd := &cobra.Command{
		Use:   "fork <sandbox-id>",
		Short: "Fork a sandbox N times (E2B fork semantics)",
		Long: `Fork snapshots the sandbox once and starts --count sandboxes from it. Each
fork succeeds or fails on its own; failures are reported per fork and make the
command exit 1.`,
		Example: `  forkbox sandbox fork sbx0001 -c 3`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			res, err := a.client().Fork(cmd.Context(), args[0], count, time.Duration(timeout)*time.Second)
			if err != nil {
				return err
			}
			var ok []*client.Sandbox
			failed := 0
			for _, r := range res {
				if r.Sandbox != nil {
					ok = append(ok, r.Sandbox)
				} else {
					failed++
					if !a.json && r.Error != nil {
						fmt.Fprintf(a.stderr, "fork failed: %s\n", r.Error.Message)
					}
				}
			}
			if a.json {
				err = a.printJSON(res)
			} else {
				err = a.printSandboxes(ok)
			}
			if err == nil && failed > 0 {
				err = fmt.Errorf("%d of %d forks failed", failed, len(res))
			}
			return err
		},
	}
	cmd.Flags().IntVarP(&count, "count", "c", 1, "number of forks (1..100)")
	cmd.Flags().IntVarP(&timeout, "timeout", "t", 0, "forks' time to live in seconds (0: server default)")
	return cmd
}
