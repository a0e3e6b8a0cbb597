package server

import (
	"fmt"
	"net/url"
	"strconv"
	"time"

	"github.com/forkbox/forkbox/internal/errdefs"
)

// metricsRange is the [start, end] of GET /sandboxes/{id}/metrics, in
// Unix seconds; an absent bound is open.
type metricsRange struct {
	start, end       int64
	hasStart, hasEnd bool
}

// parseMetricsRange reads start and end (Unix seconds, as the SDKs send
// them); end before start is a 400.
func parseMetricsRange(q url.Values) (metricsRange, error) {
	var rg metricsRange
	for _, p := range []struct {
		name string
		v    *int64
		has  *bool
	}{{"start", &rg.start, &rg.hasStart}, {"end", &rg.end, &rg.hasEnd}} {
		raw := q.Get(p.name)
		if raw == "" {
			continue
		}
		n, err := strconv.ParseInt(raw, 10, 64)
		if err != nil || n < 0 {
			return rg, fmt.Errorf("%s must be a Unix time in seconds, not %q: %w", p.name, raw, errdefs.ErrInvalidArgument)
		}
		*p.v, *p.has = n, true
	}
	if rg.hasStart && rg.hasEnd && rg.end < rg.start {
		return rg, fmt.Errorf("end (%d) is before start (%d): %w", rg.end, rg.start, errdefs.ErrInvalidArgument)
	}
	return rg, nil
}

// contains reports whether a reading taken at unix (seconds) is inside.
func (rg metricsRange) contains(unix int64) bool {
	return (!rg.hasStart || unix >= rg.start) && (!rg.hasEnd || unix <= rg.end)
}

// overlaps reports whether the range meets [from, to] (the sandbox's life
// so far), compared in whole seconds as the bounds are.
func (rg metricsRange) overlaps(from, to time.Time) bool {
	return (!rg.hasStart || rg.start <= to.Unix()) && (!rg.hasEnd || rg.end >= from.Unix())
}
