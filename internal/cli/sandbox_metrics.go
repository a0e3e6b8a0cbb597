package cli

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"
)

func (a *app) sandboxMetricsCmd() *cobra.Command {
	var since time.Duration
	cmd := &cobra.Command{
		Use:   "metrics <sandbox-id>",
		Short: "Show a sandbox's resource usage",
		Long: `Show the sandbox's recent CPU, memory and disk samples, oldest first.
With --since only the samples of that last stretch of time.`,
		Example: `  forkbox sandbox metrics sbx0001
  forkbox sandbox metrics sbx0001 --since 10m`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var start time.Time
			if since > 0 {
				start = time.Now().Add(-since)
			}
			ms, err := a.client().MetricsRange(cmd.Context(), args[0], start, time.Time{})
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
	cmd.Flags().DurationVar(&since, "since", 0, "only samples of this last `duration` (e.g. 10m)")
	return cmd
}

func mib(b int64) string { return fmt.Sprint(b >> 20) }
