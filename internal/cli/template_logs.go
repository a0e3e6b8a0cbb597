package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/forkbox/forkbox/client"
)

func (a *app) templateLogsCmd() *cobra.Command {
	var o client.TemplateLogsOptions
	cmd := &cobra.Command{
		Use:   "logs <template> <build-id>",
		Short: "Show a template build's log",
		Long: `Show a page of a template build's log: the entries from --cursor (ms since
the epoch; default the start, or the end with --direction backward), at most
--limit of them, at --level or above.`,
		Example: `  forkbox template logs myapp 1c2d…-… --level error
  forkbox template logs myapp 1c2d…-… --direction backward --limit 20 --json`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			logs, err := a.client().TemplateBuildLogs(cmd.Context(), args[0], args[1], o)
			if err != nil {
				return err
			}
			if a.json {
				if logs == nil {
					logs = []client.TemplateLogEntry{}
				}
				return a.printJSON(logs)
			}
			for _, e := range logs {
				fmt.Fprintf(a.stdout, "%s %-5s %-8s %s\n", e.Timestamp.Local().Format("15:04:05.000"), e.Level, "["+e.Step+"]", e.Message)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.Int64Var(&o.Cursor, "cursor", 0, "first entry's time, ms since the epoch (inclusive)")
	f.IntVar(&o.Limit, "limit", 0, "most entries (0: the daemon's page of 100)")
	f.StringVar(&o.Direction, "direction", "", "forward (default) or backward from --cursor")
	f.StringVar(&o.Level, "level", "", "lowest level shown: debug, info, warn, error")
	return cmd
}
