package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/forkbox/forkbox/client"
)

// diffFlags are the path filters diff and apply share.
type diffFlags struct {
	paths, exclude []string
	all            bool
	limit          int
}

func (a *app) sandboxDiffCmd() *cobra.Command {
	var f diffFlags
	var patch bool
	cmd := &cobra.Command{
		Use:   "diff <sandbox-or-snapshot-id> [against-id]",
		Short: "List the files a sandbox or snapshot changed",
		Long: `Diff lists the filesystem changes of a sandbox or snapshot since another one
(a sandbox, snapshot or template id), by default since its parent in the lineage:
the snapshot it was started from or rolled back to, or its template. Each change
is A (added), M (modified: content, mode, owner, link, xattrs, type) or D
(deleted). --patch prints a unified diff of text files (binary files are named).
A running sandbox is read without being stopped.`,
		Example: `  forkbox sandbox diff sbx0001
  forkbox sandbox diff sbx0001 sbx0002 --path '/home/user/**' --patch
  forkbox sandbox diff snap0001 snap0002 --json`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			o := client.DiffOptions{Paths: f.paths, Exclude: f.exclude, NoDefaultExcludes: f.all, Limit: f.limit}
			if len(args) == 2 {
				o.Against = args[1]
			}
			if patch {
				return a.printPatch(cmd, args[0], o)
			}
			changes, err := a.client().DiffAll(cmd.Context(), args[0], o)
			if err != nil {
				return err
			}
			if a.json {
				if changes == nil {
					changes = []client.FileChange{}
				}
				return a.printJSON(changes)
			}
			return printChanges(a.stdout, changes)
		},
	}
	f.register(cmd)
	cmd.Flags().BoolVar(&patch, "patch", false, "print a unified diff")
	return cmd
}

func (f *diffFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringArrayVar(&f.paths, "path", nil, "only paths matching this glob or below it (repeatable)")
	cmd.Flags().StringArrayVar(&f.exclude, "exclude", nil, "leave out paths matching this glob (repeatable)")
	cmd.Flags().BoolVar(&f.all, "no-default-excludes", false, "also list /proc, /sys, /dev and /tmp/.X11-unix")
	cmd.Flags().IntVar(&f.limit, "page-size", 0, "changes asked for per request (0: the server's default)")
}

// printPatch follows the patch's pages.
func (a *app) printPatch(cmd *cobra.Command, id string, o client.DiffOptions) error {
	for {
		patch, next, err := a.client().DiffPatch(cmd.Context(), id, o)
		if err != nil {
			return err
		}
		if _, err := io.WriteString(a.stdout, patch); err != nil {
			return err
		}
		if next == "" {
			return nil
		}
		o.Cursor = next
	}
}

// printChanges prints one line per change: kind, path, what and size.
func printChanges(w io.Writer, changes []client.FileChange) error {
	rows := make([][]string, 0, len(changes))
	for _, c := range changes {
		e := c.New
		if e == nil {
			e = c.Old
		}
		detail := e.Type
		if len(c.What) > 0 {
			detail = strings.Join(c.What, ",")
		}
		if e.Type == "file" {
			detail += fmt.Sprintf(" %dB", e.Size)
		}
		if e.Type == "symlink" {
			detail += " -> " + e.Link
		}
		rows = append(rows, []string{strings.ToUpper(c.Kind[:1]), c.Path, detail})
	}
	if len(rows) == 0 {
		_, err := fmt.Fprintln(w, "no changes")
		return err
	}
	return table(w, []string{"", "PATH", "CHANGE"}, rows)
}
