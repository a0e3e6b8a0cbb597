package cli

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"
)

func (a *app) sandboxMetricsCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "metrics <sandbox-id>",
		Short:   "Show a sandbox's resource usage",
		Long:    "Show the sandbox's recent CPU, memory and disk samples, oldest first.",
		Example: `  forkbox sandbox metrics sbx0001`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ms, err := a.client().Metrics(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(ms)
			}
			rows := make([][]string, 0, len(ms))
			for _, m := range ms {
				rows = append(rows, []string{
					formatTime(time.Unix(m.TimestampUnix, 0)), fmt.Sprint(m.CPUCount),
					fmt.Sprintf("%.1f", m.CPUUsedPct), mib(m.MemUsed) + " / " + mib(m.MemTotal),
					mib(m.DiskUsed) + " / " + mib(m.DiskTotal),
				})
			}
			return table(a.stdout, []string{"TIME", "CPUS", "CPU %", "MEM MiB", "DISK MiB"}, rows)
		},
	}
}

func mib(b int64) string { return fmt.Sprint(b >> 20) }
