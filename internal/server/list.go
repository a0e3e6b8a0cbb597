package server

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/sandbox"
)

// parseListOrder reads the v2 listing's order (asc or desc by start time;
// desc, newest first, by default), startedAfter (RFC 3339, inclusive) and
// template (an id or a name).
func parseListOrder(q url.Values) (sandbox.ListOrder, error) {
	o := sandbox.ListOrder{Desc: true, Template: q.Get("template")}
	switch v := q.Get("order"); v {
	case "", "desc":
	case "asc":
		o.Desc = false
	default:
		return o, fmt.Errorf("order must be asc or desc, not %q: %w", v, errdefs.ErrInvalidArgument)
	}
	if v := q.Get("startedAfter"); v != "" {
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return o, fmt.Errorf("startedAfter must be an RFC 3339 time, not %q: %w", v, errdefs.ErrInvalidArgument)
		}
		o.StartedAfter = t
	}
	return o, nil
}

// setTotalRunning sets X-Total-Running: every running sandbox, whatever
// the listing's filters (as E2B counts a team's running sandboxes).
func (s *Server) setTotalRunning(ctx context.Context, h http.Header) error {
	n, err := s.mgr.CountRunning(ctx)
	if err != nil {
		return err
	}
	h.Set("X-Total-Running", strconv.Itoa(n))
	return nil
}
