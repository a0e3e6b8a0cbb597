package cli

import (
	"github.com/spf13/cobra"

	"github.com/forkbox/forkbox/client"
)

// sandboxCmd groups the sandbox lifecycle verbs.
func (a *app) sandboxCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "sandbox",
		Aliases: []string{"sb", "sandboxes"},
		Short:   "Create, inspect and manage sandboxes",
		Long:    "Create, list, inspect, kill, pause, resume, clone, fork and roll back sandboxes.",
		Example: `  forkbox sandbox create --template base --timeout 600
  forkbox sandbox list --state running`,
	}
	cmd.AddCommand(
		a.sandboxCreateCmd(), a.sandboxListCmd(), a.sandboxInfoCmd(), a.sandboxKillCmd(),
		a.sandboxTimeoutCmd(), a.sandboxRefreshCmd(), a.sandboxMetricsCmd(),
		a.sandboxPauseCmd(), a.sandboxResumeCmd(), a.sandboxCloneCmd(), a.sandboxForkCmd(),
		a.sandboxRollbackCmd(), a.sandboxLogsCmd(), a.sandboxNetworkCmd(),
		a.sandboxDiffCmd(), a.sandboxApplyCmd(),
	)
	return cmd
}

// printSandboxes prints started sandboxes (create, resume, clone, fork).
func (a *app) printSandboxes(sbs []*client.Sandbox) error {
	rows := make([][]string, 0, len(sbs))
	for _, sb := range sbs {
		rows = append(rows, []string{sb.SandboxID, orDash(sb.TemplateID), orDash(sb.EnvdVersion)})
	}
	return table(a.stdout, []string{"SANDBOX ID", "TEMPLATE", "ENVD"}, rows)
}
