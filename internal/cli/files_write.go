package cli

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
)

func (a *app) filesWriteCmd() *cobra.Command {
	var from string
	var md map[string]string
	cmd := &cobra.Command{
		Use:     "write <sandbox-id> <path>",
		Aliases: []string{"put"},
		Short:   "Write a file from a local file or stdin",
		Long: "Upload a local file (--from) or standard input (--from -, the default) to path, creating parent directories and replacing an existing file. " +
			"--metadata key=value (repeatable) becomes the file's metadata (keys lowercased, printable ASCII); a write without it clears the file's metadata.",
		Example: `  forkbox files write sbx0001 /home/user/main.py --from ./main.py
  echo hello | forkbox files write sbx0001 hello.txt --metadata author=me --metadata purpose=demo`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			var src io.Reader = a.stdin
			if from != "-" {
				f, err := os.Open(from)
				if err != nil {
					return err
				}
				defer f.Close()
				src = f
			}
			if src == nil {
				return fmt.Errorf("no input: use --from")
			}
			conn, err := a.filesConn(cmd, args[0])
			if err != nil {
				return err
			}
			entry, err := conn.WriteFileWithMetadata(cmd.Context(), args[1], src, md)
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(map[string]any{"sandboxID": args[0], "path": entry.Path, "ok": true, "metadata": entry.Metadata})
			}
			_, err = fmt.Fprintf(a.stdout, "wrote %s\n", args[1])
			return err
		},
	}
	cmd.Flags().StringVarP(&from, "from", "f", "-", "local file to upload, - for stdin")
	cmd.Flags().StringToStringVarP(&md, "metadata", "m", nil, "file metadata key=value (repeatable)")
	return cmd
}
