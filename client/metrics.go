package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// MetricsRange returns the sandbox's samples taken between start and end
// (GET /sandboxes/{id}/metrics?start&end, whole seconds; a zero time is an
// open bound). A range before the sandbox existed is empty.
func (c *Client) MetricsRange(ctx context.Context, id string, start, end time.Time) ([]Metric, error) {
	q := url.Values{}
	if !start.IsZero() {
		q.Set("start", strconv.FormatInt(start.Unix(), 10))
	}
	if !end.IsZero() {
		q.Set("end", strconv.FormatInt(end.Unix(), 10))
	}
	var m []Metric
	if _, err := c.do(ctx, call{method: http.MethodGet, path: "/sandboxes/" + pathID(id) + "/metrics", query: q, out: &m}); err != nil {
		return nil, err
	}
	return m, nil
}

// MetricsMany returns the latest sample of each running sandbox named (at
// most 100) by id (GET /sandboxes/metrics?sandbox_ids=…); sandboxes not
// running are left out.
func (c *Client) MetricsMany(ctx context.Context, ids []string) (map[string]Metric, error) {
	var out struct {
		Sandboxes map[string]Metric `json:"sandboxes"`
	}
	q := url.Values{"sandbox_ids": {strings.Join(ids, ",")}}
	if _, err := c.do(ctx, call{method: http.MethodGet, path: "/sandboxes/metrics", query: q, out: &out}); err != nil {
		return nil, err
	}
	return out.Sandboxes, nil
}
