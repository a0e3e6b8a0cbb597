package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
)

// TemplateLogsOptions selects build log entries: from Cursor (ms since the
// epoch, inclusive; 0: the start, or the end going backward) in Direction
// ("forward", the default, or "backward"), at most Limit (0: the daemon's
// page of 100), at Level or above ("" keeps all: debug, info, warn, error).
type TemplateLogsOptions struct {
	Cursor    int64
	Limit     int
	Direction string
	Level     string
}

// TemplateBuildLogs returns a page of a build's log (GET
// /templates/{id}/builds/{buildID}/logs).
func (c *Client) TemplateBuildLogs(ctx context.Context, templateID, buildID string, o TemplateLogsOptions) ([]TemplateLogEntry, error) {
	q := url.Values{}
	if o.Cursor > 0 {
		q.Set("cursor", strconv.FormatInt(o.Cursor, 10))
	}
	if o.Limit > 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	if o.Direction != "" {
		q.Set("direction", o.Direction)
	}
	if o.Level != "" {
		q.Set("level", o.Level)
	}
	var out struct {
		Logs []TemplateLogEntry `json:"logs"`
	}
	_, err := c.do(ctx, call{method: http.MethodGet, path: "/templates/" + pathID(templateID) + "/builds/" + pathID(buildID) + "/logs", query: q, out: &out})
	return out.Logs, err
}
