package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/forkbox/forkbox/client"
)

func (a *app) sandboxApplyCmd() *cobra.Command {
	var o client.ApplyOptions
	cmd := &cobra.Command{
		Use:   "apply <sandbox-id> --from <sandbox-or-snapshot-id>",
		Short: "Bring another sandbox's or snapshot's file changes into a sandbox",
		Long: `Apply merges the file changes --from made since --base (by default the nearest
state both derive from in the lineage) into the running sandbox: changes made on
one side only are taken; a file both changed differently is a conflict, listed
and left as it is unless --strategy theirs (take --from's) or ours (keep the
sandbox's) is given. Nothing is written if any change fails. Memory and
processes are not merged.`,
		Example: `  forkbox sandbox apply sbx0001 --from sbx0002
  forkbox sandbox apply sbx0001 --from snap0003 --path /home/user/src --strategy theirs
  forkbox sandbox apply sbx0001 --from sbx0002 --dry-run --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			res, err := a.client().Apply(cmd.Context(), args[0], o)
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(res)
			}
			return a.printApply(res)
		},
	}
	cmd.Flags().StringVar(&o.From, "from", "", "the sandbox or snapshot whose changes to bring (required)")
	cmd.Flags().StringVar(&o.Base, "base", "", "count --from's changes since this sandbox, snapshot or template")
	cmd.Flags().StringArrayVar(&o.Paths, "path", nil, "only paths matching this glob or below it (repeatable)")
	cmd.Flags().StringVar(&o.Strategy, "strategy", "", "settle conflicts: theirs or ours")
	cmd.Flags().BoolVar(&o.DryRun, "dry-run", false, "show what would be applied without writing")
	cmd.MarkFlagRequired("from")
	return cmd
}

func (a *app) printApply(res *client.ApplyResult) error {
	verb := "applied"
	if res.DryRun {
		verb = "would apply"
	}
	if err := printChanges(a.stdout, res.Applied); err != nil {
		return err
	}
	for _, c := range res.Conflicts {
		how := "left as it is"
		if c.Resolved != "" {
			how = "settled: " + c.Resolved
		}
		fmt.Fprintf(a.stdout, "C  %s  conflict, %s\n", c.Path, how)
	}
	_, err := fmt.Fprintf(a.stdout, "%s %d changes from %s (base %s) into %s; %d conflicts, %d already equal, %d ms\n",
		verb, len(res.Applied), res.From, res.Base, res.ID, len(res.Conflicts), res.Unchanged, res.TookMs)
	return err
}
