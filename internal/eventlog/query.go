package eventlog

import (
	"slices"
	"strings"
	"time"
)

// Query selects events of one sandbox's log.
type Query struct {
	// Cursor, when set, is where the page starts: events at or after it
	// (forward) or at or before it (Backward).
	Cursor time.Time
	// Backward lists the newest first.
	Backward bool
	// Level keeps events at this level or above ("": all).
	Level string
	// Search keeps events whose message contains it (case-sensitive, as
	// E2B's search is).
	Search string
	// Limit caps the result (0: no cap; negative: nothing).
	Limit int
}

// rank orders levels; unknown levels rank as info.
func rank(level string) int {
	switch strings.ToLower(level) {
	case LevelDebug:
		return 0
	case LevelWarn, "warning":
		return 2
	case LevelError:
		return 3
	default:
		return 1
	}
}

// ValidLevel reports whether level names a level.
func ValidLevel(level string) bool {
	switch strings.ToLower(level) {
	case LevelDebug, LevelInfo, LevelWarn, "warning", LevelError:
		return true
	}
	return false
}

// Select returns the events of evs (oldest first) that q selects, in q's
// direction.
func Select(evs []Event, q Query) []Event {
	out := []Event{}
	if q.Limit < 0 {
		return out
	}
	order := slices.Clone(evs)
	if q.Backward {
		slices.Reverse(order)
	}
	for _, ev := range order {
		if !q.Cursor.IsZero() && ((!q.Backward && ev.Time.Before(q.Cursor)) || (q.Backward && ev.Time.After(q.Cursor))) {
			continue
		}
		if q.Level != "" && rank(ev.Level) < rank(q.Level) {
			continue
		}
		if q.Search != "" && !strings.Contains(ev.Message, q.Search) {
			continue
		}
		out = append(out, ev)
		if q.Limit > 0 && len(out) == q.Limit {
			break
		}
	}
	return out
}
