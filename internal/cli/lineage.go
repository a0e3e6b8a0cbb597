package cli

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/forkbox/forkbox/client"
)

func (a *app) lineageCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "lineage <sandbox-or-snapshot-id>",
		Short: "Draw the tree of snapshots, clones, forks and rollbacks",
		Long: `Draw the lineage tree that contains the sandbox or snapshot, from its root: one
line per node with its id, kind, origin and state. The node asked for is marked
with "*".`,
		Example: `  forkbox lineage sbx0001
  forkbox lineage sbx0001 --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			root, err := a.client().Lineage(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(root)
			}
			return renderLineage(a.stdout, root, args[0])
		},
	}
}

// renderLineage draws the tree with box-drawing guides; the columns after
// the id are aligned across all lines.
func renderLineage(w io.Writer, root *client.LineageNode, mark string) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tKIND\tORIGIN\tSTATE")
	var walk func(n *client.LineageNode, lead, branch string)
	walk = func(n *client.LineageNode, lead, branch string) {
		id := n.ID
		if id == mark {
			id += " *"
		}
		fmt.Fprintf(tw, "%s%s%s\t%s\t%s\t%s\n", lead, branch, id, orDash(n.Kind), orDash(n.Origin), orDash(n.State))
		// Children continue the parent's guide: a vertical bar while the
		// parent has later siblings, blank after the last one.
		childLead := lead
		switch branch {
		case "├─ ":
			childLead += "│  "
		case "└─ ":
			childLead += "   "
		}
		for i, ch := range n.Children {
			b := "├─ "
			if i == len(n.Children)-1 {
				b = "└─ "
			}
			walk(ch, childLead, b)
		}
	}
	walk(root, "", "")
	return tw.Flush()
}
