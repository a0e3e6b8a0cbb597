package cli

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

func (a *app) filesReadCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "read <sandbox-id> <path>",
		Aliases: []string{"cat", "get"},
		Short:   "Print a file to stdout",
		Long:    "Download a file from the sandbox and write its content to stdout (--json is ignored: the bytes are the output).",
		Example: `  forkbox files read sbx0001 /etc/os-release
  forkbox files read sbx0001 out.tar > out.tar`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			conn, err := a.filesConn(cmd, args[0])
			if err != nil {
				return err
			}
			rc, err := conn.OpenFile(cmd.Context(), args[1])
			if err != nil {
				return err
			}
			defer rc.Close()
			if _, err := io.Copy(a.stdout, rc); err != nil {
				return fmt.Errorf("read %s: %w", args[1], err)
			}
			return nil
		},
	}
}
