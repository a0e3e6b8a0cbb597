package cli

import (
	"fmt"

	"github.com/spf13/cobra"
)

func (a *app) sandboxInfoCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "info <sandbox-id>",
		Aliases: []string{"get", "inspect"},
		Short:   "Show one sandbox",
		Long:    "Show a sandbox's state, template, deadline, resources and metadata.",
		Example: `  forkbox sandbox info sbx0001
  forkbox sandbox info sbx0001 --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := a.client().GetSandbox(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(s)
			}
			rows := [][2]string{
				{"Sandbox ID", s.SandboxID}, {"Template", s.TemplateID}, {"State", s.State},
				{"Started", formatTime(s.StartedAt)}, {"Ends", formatTime(s.EndAt)},
				{"CPUs", fmt.Sprint(s.CPUCount)}, {"Memory MB", fmt.Sprint(s.MemoryMB)},
				{"Envd", orDash(s.EnvdVersion)}, {"Metadata", orDash(formatKV(s.Metadata))},
			}
			if s.KillReason != "" {
				rows = append(rows, [2]string{"Killed", s.KillReason + " at " + formatTime(s.KilledAt)})
			}
			if s.Operation != "" {
				rows = append(rows, [2]string{"Operation", s.Operation})
			}
			return fields(a.stdout, rows)
		},
	}
}
