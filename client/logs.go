package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// LogEntry is one event of a sandbox's log: a lifecycle change (created,
// paused, resumed, snapshot taken, cloned, rolled back, expired), a process
// started or exited (with its command and exit code), or an agent warning.
// Fields["logger"] tells the source (forkbox.lifecycle, forkbox.agent).
type LogEntry struct {
	Timestamp time.Time         `json:"timestamp"`
	Level     string            `json:"level"`
	Message   string            `json:"message"`
	Fields    map[string]string `json:"fields"`
}

// LogsOptions select entries for Logs. The zero value is the oldest 1000.
type LogsOptions struct {
	// Cursor, when set, is where to start (inclusive, millisecond precision).
	Cursor time.Time
	// Backward lists the newest first.
	Backward bool
	// Level is the lowest level kept (debug, info, warn, error).
	Level string
	// Search keeps entries whose message contains it (case-sensitive).
	Search string
	// Limit caps the entries (the server's maximum is 1000).
	Limit int
}

// Logs returns entries of a sandbox's log (GET /v2/sandboxes/{id}/logs).
func (c *Client) Logs(ctx context.Context, id string, o LogsOptions) ([]LogEntry, error) {
	q := url.Values{}
	if !o.Cursor.IsZero() {
		q.Set("cursor", strconv.FormatInt(o.Cursor.UnixMilli(), 10))
	}
	if o.Backward {
		q.Set("direction", "backward")
	}
	if o.Level != "" {
		q.Set("level", o.Level)
	}
	if o.Search != "" {
		q.Set("search", o.Search)
	}
	if o.Limit > 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	var out struct {
		Logs []LogEntry `json:"logs"`
	}
	if _, err := c.do(ctx, call{method: http.MethodGet, path: "/v2/sandboxes/" + pathID(id) + "/logs", query: q, out: &out}); err != nil {
		return nil, err
	}
	return out.Logs, nil
}
