package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/forkbox/forkbox/client"
)

func (a *app) sandboxListCmd() *cobra.Command {
	var (
		o        client.ListOptions
		states   string
		metadata []string
		all      bool
		after    string
	)
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List sandboxes",
		Long: `List running and paused sandboxes, newest first (--order asc: oldest first).
Without --all one page is printed and the token of the next one is reported on
stderr; pages are positions, so sandboxes created or killed meanwhile do not
shift them.`,
		Example: `  forkbox sandbox list
  forkbox sandbox list --state paused --metadata owner=me
  forkbox sandbox list --template base --started-after 2026-01-02T15:04:05Z
  forkbox sandbox list --all --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var err error
			if o.Metadata, err = parseKV(metadata); err != nil {
				return err
			}
			if states != "" {
				o.State = strings.Split(states, ",")
			}
			if after != "" {
				if o.StartedAfter, err = time.Parse(time.RFC3339Nano, after); err != nil {
					return fmt.Errorf("--started-after must be an RFC 3339 time: %w", err)
				}
			}
			list, err := a.listSandboxPages(cmd.Context(), o, all)
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(list)
			}
			return a.printSandboxInfos(list)
		},
	}
	f := cmd.Flags()
	f.StringVar(&states, "state", "", "comma-separated states to keep (running,paused)")
	f.StringArrayVar(&metadata, "metadata", nil, "keep sandboxes with metadata `key=value` (repeatable)")
	f.IntVar(&o.Limit, "limit", 0, "page size (server maximum 100)")
	f.StringVar(&o.NextToken, "next-token", "", "continue a previous listing")
	f.BoolVar(&all, "all", false, "follow every page")
	f.StringVar(&o.Order, "order", "", "asc (oldest first) or desc (newest first, the default)")
	f.StringVar(&o.Template, "template", "", "keep sandboxes of this template (id or name)")
	f.StringVar(&after, "started-after", "", "keep sandboxes started at or after this RFC 3339 `time`")
	return cmd
}

// listSandboxPages lists one page, or every page with all; the token of
// an unread next page is reported on stderr.
func (a *app) listSandboxPages(ctx context.Context, o client.ListOptions, all bool) ([]client.SandboxInfo, error) {
	c := a.client()
	var list []client.SandboxInfo
	for {
		page, next, err := c.ListSandboxes(ctx, o)
		if err != nil {
			return nil, err
		}
		list = append(list, page...)
		if next == "" {
			return list, nil
		}
		if !all {
			fmt.Fprintf(a.stderr, "more sandboxes: use --all or --next-token %s\n", next)
			return list, nil
		}
		o.NextToken = next
	}
}

func (a *app) printSandboxInfos(list []client.SandboxInfo) error {
	rows := make([][]string, 0, len(list))
	for _, s := range list {
		rows = append(rows, []string{
			s.SandboxID, s.TemplateID, s.State, formatTime(s.StartedAt), formatTime(s.EndAt),
			fmt.Sprint(s.CPUCount), fmt.Sprint(s.MemoryMB), orDash(formatKV(s.Metadata)),
		})
	}
	return table(a.stdout, []string{"SANDBOX ID", "TEMPLATE", "STATE", "STARTED", "ENDS", "CPU", "MEM MB", "METADATA"}, rows)
}
