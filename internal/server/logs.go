package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/eventlog"
)

// Bounds of the logs routes' limit.
const (
	defaultLogsLimit = 1000
	maxLogsLimit     = 1000
)

// logEntryJSON is the SandboxLogEntry schema.
type logEntryJSON struct {
	Timestamp string            `json:"timestamp"`
	Level     string            `json:"level"`
	Message   string            `json:"message"`
	Fields    map[string]string `json:"fields"`
}

// logLineJSON is the legacy SandboxLog schema: line is a JSON object with
// level and logger keys (E2B's CLI parses it) plus the message and fields.
type logLineJSON struct {
	Timestamp string `json:"timestamp"`
	Line      string `json:"line"`
}

func toLogEntry(ev eventlog.Event) logEntryJSON {
	f := ev.Fields
	if f == nil {
		f = map[string]string{}
	}
	f["logger"] = ev.Logger
	return logEntryJSON{Timestamp: wireTime(ev.Time), Level: ev.Level, Message: ev.Message, Fields: f}
}

func toLogLine(ev eventlog.Event) logLineJSON {
	line := map[string]any{"level": ev.Level, "logger": ev.Logger, "message": ev.Message, "timestamp": wireTime(ev.Time)}
	for k, v := range ev.Fields {
		if _, taken := line[k]; !taken {
			line[k] = v
		}
	}
	b, _ := json.Marshal(line)
	return logLineJSON{Timestamp: wireTime(ev.Time), Line: string(b)}
}

// logsV2 is GET /v2/sandboxes/{id}/logs?cursor&limit&direction&level&search:
// {logs: [{timestamp, level, message, fields}]}. cursor is a Unix time in
// ms where the page starts (inclusive), direction forward (oldest first,
// the default) or backward, level the lowest level kept, search a
// case-sensitive substring of the message, limit ≤ 1000.
func (s *Server) logsV2(w http.ResponseWriter, r *http.Request) {
	q, err := parseLogsQuery(r.URL.Query(), "cursor")
	if err != nil {
		writeError(w, err)
		return
	}
	evs, err := s.mgr.Logs(r.Context(), r.PathValue("id"), q)
	if err != nil {
		writeError(w, err)
		return
	}
	out := make([]logEntryJSON, 0, len(evs))
	for _, ev := range evs {
		out = append(out, toLogEntry(ev))
	}
	writeJSON(w, http.StatusOK, map[string]any{"logs": out})
}

// logsV1 is GET /sandboxes/{id}/logs?start&limit (start in Unix ms): the
// legacy {logs: [{timestamp, line}], logEntries: [...]}, oldest first.
func (s *Server) logsV1(w http.ResponseWriter, r *http.Request) {
	v := r.URL.Query()
	for _, k := range []string{"direction", "level", "search"} {
		v.Del(k) // not part of the legacy route
	}
	q, err := parseLogsQuery(v, "start")
	if err != nil {
		writeError(w, err)
		return
	}
	evs, err := s.mgr.Logs(r.Context(), r.PathValue("id"), q)
	if err != nil {
		writeError(w, err)
		return
	}
	lines, entries := make([]logLineJSON, 0, len(evs)), make([]logEntryJSON, 0, len(evs))
	for _, ev := range evs {
		lines = append(lines, toLogLine(ev))
		entries = append(entries, toLogEntry(ev))
	}
	writeJSON(w, http.StatusOK, map[string]any{"logs": lines, "logEntries": entries})
}

// parseLogsQuery reads the logs routes' parameters; cursorKey names the
// start parameter (v2's cursor, v1's start).
func parseLogsQuery(v url.Values, cursorKey string) (eventlog.Query, error) {
	q := eventlog.Query{Limit: defaultLogsLimit, Level: v.Get("level"), Search: v.Get("search")}
	if raw := v.Get(cursorKey); raw != "" {
		ms, err := strconv.ParseInt(raw, 10, 64)
		if err != nil || ms < 0 {
			return q, fmt.Errorf("%s must be a Unix time in milliseconds, not %q: %w", cursorKey, raw, errdefs.ErrInvalidArgument)
		}
		q.Cursor = time.UnixMilli(ms)
	}
	if raw := v.Get("limit"); raw != "" {
		n, err := strconv.Atoi(raw)
		if err != nil || n < 0 || n > maxLogsLimit {
			return q, fmt.Errorf("limit must be between 0 and %d: %w", maxLogsLimit, errdefs.ErrInvalidArgument)
		}
		q.Limit = n
		if n == 0 {
			q.Limit = -1 // nothing asked for
		}
	}
	switch d := v.Get("direction"); d {
	case "", "forward":
	case "backward":
		q.Backward = true
	default:
		return q, fmt.Errorf("direction must be forward or backward, not %q: %w", d, errdefs.ErrInvalidArgument)
	}
	if q.Level != "" && !eventlog.ValidLevel(q.Level) {
		return q, fmt.Errorf("level must be debug, info, warn or error, not %q: %w", q.Level, errdefs.ErrInvalidArgument)
	}
	return q, nil
}
