package client

import (
	"net/url"
	"time"
)

// setListOrder adds ListOptions' order and the filters beside state and
// metadata to a GET /v2/sandboxes query.
func setListOrder(q url.Values, o ListOptions) {
	if o.Order != "" {
		q.Set("order", o.Order)
	}
	if !o.StartedAfter.IsZero() {
		q.Set("startedAfter", o.StartedAfter.UTC().Format(time.RFC3339Nano))
	}
	if o.Template != "" {
		q.Set("template", o.Template)
	}
}
