package cli

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/forkbox/forkbox/client"
)

func (a *app) sandboxCloneCmd() *cobra.Command {
	var (
		o       client.CloneOptions
		timeout int
	)
	cmd := &cobra.Command{
		Use:   "clone <sandbox-id>",
		Short: "Derive N isolated copies of a sandbox",
		Long: `Clone snapshots a running or paused sandbox once and starts --count copies
from it. Each clone has the source's files and memory at that moment and is
isolated from the source and the other clones. With --strict the call is
all-or-nothing.`,
		Example: `  forkbox sandbox clone sbx0001 -c 2 --strict --timeout 600`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Timeout = time.Duration(timeout) * time.Second
			res, err := a.client().Clone(cmd.Context(), args[0], o)
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(res)
			}
			if err := a.printSandboxes(res.Sandboxes); err != nil {
				return err
			}
			_, err = fmt.Fprintf(a.stdout, "snapshot: %s\n", res.SnapshotTemplateID)
			return err
		},
	}
	f := cmd.Flags()
	f.IntVarP(&o.Count, "count", "c", 1, "number of clones")
	f.BoolVar(&o.Strict, "strict", false, "fail and release all clones unless all start")
	f.IntVarP(&timeout, "timeout", "t", 0, "clones' time to live in seconds (0: inherit)")
	return cmd
}
