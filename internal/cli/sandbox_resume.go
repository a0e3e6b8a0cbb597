package cli

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/forkbox/forkbox/client"
)

func (a *app) sandboxResumeCmd() *cobra.Command {
	var (
		timeout int
		reboot  bool
	)
	cmd := &cobra.Command{
		Use:     "resume <sandbox-id>",
		Aliases: []string{"connect"},
		Short:   "Resume a paused sandbox",
		Long: `Resume a paused sandbox (waiting for a pause in progress) and set its deadline
to now + --timeout. On a running sandbox this only extends the deadline.
With --reboot the paused sandbox is cold-booted from its files (processes
gone), whatever kind of pause it had.`,
		Example: `  forkbox sandbox resume sbx0001 --timeout 600
  forkbox sandbox resume sbx0001 --reboot`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			connect := a.client().Connect
			if reboot {
				connect = a.client().ConnectReboot
			}
			sb, err := connect(cmd.Context(), args[0], time.Duration(timeout)*time.Second)
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(sb)
			}
			return a.printSandboxes([]*client.Sandbox{sb})
		},
	}
	cmd.Flags().IntVarP(&timeout, "timeout", "t", 300, "time to live in seconds after resuming")
	cmd.Flags().BoolVar(&reboot, "reboot", false, "cold-boot the sandbox from its files instead of restoring its memory")
	return cmd
}
