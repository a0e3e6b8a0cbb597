package server

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/forkbox/forkbox/internal/errdefs"
)

// metrics is GET /sandboxes/{id}/metrics?start&end (Unix seconds): the
// readings inside the range (metricsRange). forkbox keeps no history of
// readings: the current one is answered when now is inside the range, so
// a range before the sandbox existed (or one ended) is an empty array.
func (s *Server) metrics(w http.ResponseWriter, r *http.Request) {
	rg, err := parseMetricsRange(r.URL.Query())
	if err != nil {
		writeError(w, err)
		return
	}
	id := r.PathValue("id")
	sb, err := s.mgr.Get(r.Context(), id)
	if err != nil {
		writeError(w, err)
		return
	}
	out := []metricJSON{}
	if !rg.overlaps(sb.StartedAt, time.Now()) {
		writeJSON(w, http.StatusOK, out)
		return
	}
	ms, err := s.readMetrics(r.Context(), id)
	if err != nil {
		writeError(w, err)
		return
	}
	for _, m := range ms {
		if rg.contains(m.TimestampUnix) {
			out = append(out, m)
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// readMetrics returns a sandbox's readings in the wire shape.
func (s *Server) readMetrics(ctx context.Context, id string) ([]metricJSON, error) {
	ms, err := s.mgr.Metrics(ctx, id)
	if err != nil {
		return nil, err
	}
	out := []metricJSON{}
	for _, m := range ms {
		out = append(out, toMetric(m))
	}
	return out, nil
}

// maxMetricsIDs bounds GET /sandboxes/metrics?sandbox_ids=.
const maxMetricsIDs = 100

// metricsMany is GET /sandboxes/metrics?sandbox_ids=a,b: the latest
// reading of each running sandbox named, as {sandboxes: {id: metric}}.
// Unknown or stopped sandboxes are left out.
func (s *Server) metricsMany(w http.ResponseWriter, r *http.Request) {
	var ids []string
	for _, v := range r.URL.Query()["sandbox_ids"] {
		for id := range strings.SplitSeq(v, ",") {
			if id = strings.TrimSpace(id); id != "" {
				ids = append(ids, id)
			}
		}
	}
	if len(ids) == 0 || len(ids) > maxMetricsIDs {
		writeError(w, fmt.Errorf("sandbox_ids must name 1 to %d sandboxes: %w", maxMetricsIDs, errdefs.ErrInvalidArgument))
		return
	}
	out := map[string]metricJSON{}
	for _, id := range ids {
		ms, err := s.readMetrics(r.Context(), id)
		if err != nil || len(ms) == 0 {
			continue
		}
		out[id] = ms[len(ms)-1]
	}
	writeJSON(w, http.StatusOK, map[string]any{"sandboxes": out})
}
