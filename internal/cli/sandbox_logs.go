package cli

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/forkbox/forkbox/client"
)

// followEvery is how often `sandbox logs -f` asks for new entries.
const followEvery = time.Second

func (a *app) sandboxLogsCmd() *cobra.Command {
	var (
		o      client.LogsOptions
		follow bool
	)
	cmd := &cobra.Command{
		Use:   "logs <sandbox-id>",
		Short: "Show a sandbox's event log",
		Long: `Show the sandbox's events, oldest first: lifecycle changes (created, paused,
resumed, snapshot taken, cloned, rolled back, expired), processes started and
exited with their command and exit code, and the agent's warnings. The log is
kept across pause/resume and daemon restarts and bounded per sandbox. With -f
new entries are printed as they come until the sandbox is gone or you stop it.`,
		Example: `  forkbox sandbox logs sbx0001
  forkbox sandbox logs sbx0001 -f --level warn
  forkbox sandbox logs sbx0001 --search exited --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.printLogs(cmd.Context(), args[0], o, follow)
		},
	}
	f := cmd.Flags()
	f.BoolVarP(&follow, "follow", "f", false, "keep printing new entries")
	f.StringVar(&o.Level, "level", "", "lowest `level` shown (debug, info, warn, error)")
	f.StringVar(&o.Search, "search", "", "only entries whose message contains this `text`")
	f.IntVar(&o.Limit, "limit", 0, "at most this many entries (server maximum 1000)")
	return cmd
}

// printLogs prints the log, then (follow) polls for entries after the last
// one printed. The cursor has millisecond precision and is inclusive, so the
// entries at its millisecond come back on the next poll; the log keeps equal
// times in the order they were written, so the first atCursor of them are
// those already printed (two identical lines in one millisecond are still
// two lines).
func (a *app) printLogs(ctx context.Context, id string, o client.LogsOptions, follow bool) error {
	c := a.client()
	printed, atCursor := 0, 0
	for {
		entries, err := c.Logs(ctx, id, o)
		if err != nil {
			if follow && (client.IsNotFound(err) || errors.Is(err, context.Canceled)) && printed > 0 {
				return nil // the sandbox is gone, or the user stopped
			}
			return err
		}
		skip := atCursor
		for _, e := range entries {
			ms := e.Timestamp.UnixMilli()
			if skip > 0 && ms == o.Cursor.UnixMilli() {
				skip--
				continue
			}
			if err := a.printLogEntry(e); err != nil {
				return err
			}
			printed++
			if !o.Cursor.IsZero() && ms == o.Cursor.UnixMilli() {
				atCursor++
			} else {
				o.Cursor, atCursor = time.UnixMilli(ms), 1
			}
		}
		if !follow {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(followEvery):
		}
	}
}

func (a *app) printLogEntry(e client.LogEntry) error {
	if a.json {
		return a.printJSON(e)
	}
	var kv []string
	for _, k := range slices.Sorted(maps.Keys(e.Fields)) {
		if k != "logger" {
			kv = append(kv, k+"="+e.Fields[k])
		}
	}
	_, err := fmt.Fprintf(a.stdout, "%s %-5s %s %s\n", e.Timestamp.UTC().Format(time.RFC3339Nano), strings.ToUpper(e.Level), e.Message, strings.Join(kv, " "))
	return err
}
