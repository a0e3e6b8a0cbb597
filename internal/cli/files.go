package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/forkbox/forkbox/client"
)

// filesCmd groups the file verbs.
func (a *app) filesCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "files",
		Aliases: []string{"fs"},
		Short:   "List, read and write files in a sandbox",
		Long: `List, read and write files in a sandbox. Relative paths resolve against the
user's home directory (/home/user for the default user).`,
		Example: `  forkbox files ls sbx0001 /home/user
  forkbox files write sbx0001 data.csv --from ./data.csv
  forkbox files read sbx0001 /etc/os-release`,
	}
	cmd.PersistentFlags().StringP("user", "u", "", "access files as this user")
	cmd.AddCommand(a.filesLsCmd(), a.filesReadCmd(), a.filesWriteCmd())
	return cmd
}

// filesConn opens the data-plane connection for a files verb.
func (a *app) filesConn(cmd *cobra.Command, id string) (*client.SandboxConn, error) {
	user, _ := cmd.Flags().GetString("user")
	return a.conn(cmd.Context(), id, user)
}

func (a *app) filesLsCmd() *cobra.Command {
	var depth int
	cmd := &cobra.Command{
		Use:     "ls <sandbox-id> [path]",
		Aliases: []string{"list"},
		Short:   "List a directory",
		Long:    "List a directory (default: the user's home); --depth descends into subdirectories.",
		Example: `  forkbox files ls sbx0001 /home/user --depth 2`,
		Args:    cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := "."
			if len(args) == 2 {
				path = args[1]
			}
			conn, err := a.filesConn(cmd, args[0])
			if err != nil {
				return err
			}
			entries, err := conn.ListDir(cmd.Context(), path, depth)
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(entries)
			}
			rows := make([][]string, 0, len(entries))
			for _, e := range entries {
				rows = append(rows, []string{orDash(e.Permissions), orDash(e.Owner), fmt.Sprint(e.Size), formatTime(e.ModifiedTime), orDash(e.Type), e.Path})
			}
			return table(a.stdout, []string{"MODE", "OWNER", "SIZE", "MODIFIED", "TYPE", "PATH"}, rows)
		},
	}
	cmd.Flags().IntVarP(&depth, "depth", "d", 1, "levels to descend")
	return cmd
}
