package store

import (
	"context"
	"slices"
	"testing"
	"time"
)

func TestEvents(t *testing.T) { eachBackend(t, testEvents) }

func testEvents(t *testing.T, s *Store) {
	ctx := context.Background()
	at := func(sec int) time.Time { return time.Unix(1000+int64(sec), 0) }
	row := func(sec int, logger, data string) EventRow {
		return EventRow{Time: at(sec), Logger: logger, Data: []byte(data)}
	}
	if err := s.AppendEvents(ctx, "a", []EventRow{row(2, "life", "a2"), row(1, "agent", "a1"), row(2, "life", "a2b")}); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendEvents(ctx, "b", []EventRow{row(5, "life", "b5")}); err != nil {
		t.Fatal(err)
	}
	datas := func(id string, limit int) []string {
		t.Helper()
		rows, err := s.ListEvents(ctx, id, limit)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range rows {
			out = append(out, string(r.Data))
		}
		return out
	}
	// By time, and by writing among equal times.
	if got, want := datas("a", 10), []string{"a1", "a2", "a2b"}; !slices.Equal(got, want) {
		t.Errorf("events of a: %q, want %q", got, want)
	}
	if got, want := datas("a", 2), []string{"a2", "a2b"}; !slices.Equal(got, want) {
		t.Errorf("newest 2 events of a: %q, want %q", got, want)
	}
	if last, err := s.LastEvent(ctx, "a", "agent"); err != nil || !last.Equal(at(1)) {
		t.Errorf("last agent event of a: %v %v, want %v", last, err, at(1))
	}
	if last, err := s.LastEvent(ctx, "a", "nobody"); err != nil || !last.IsZero() {
		t.Errorf("last event of a logger with none: %v %v", last, err)
	}
	if ids, err := s.EventSandboxes(ctx, time.Now().Add(time.Minute)); err != nil || !slices.Equal(ids, []string{"a", "b"}) {
		t.Errorf("quiet logs: %q %v", ids, err)
	}
	if ids, err := s.EventSandboxes(ctx, time.Now().Add(-time.Minute)); err != nil || len(ids) != 0 {
		t.Errorf("logs quiet for a minute, just after writing: %q %v", ids, err)
	}
	if err := s.AppendEvents(ctx, "a", []EventRow{row(3, "life", "a3")}); err != nil {
		t.Fatal(err)
	}
	if err := s.TrimEvents(ctx, "a", 2); err != nil {
		t.Fatal(err)
	}
	if got, want := datas("a", 10), []string{"a2", "a2b", "a3"}; !slices.Equal(got, want) {
		t.Errorf("a trimmed to 2 (equal times stay together): %q, want %q", got, want)
	}
	if err := s.TrimEvents(ctx, "b", 2); err != nil {
		t.Fatal(err)
	}
	if got := datas("b", 10); len(got) != 1 {
		t.Errorf("trimming a shorter log changed it: %q", got)
	}
	if err := s.DeleteEvents(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if got := datas("a", 10); len(got) != 0 {
		t.Errorf("deleted log: %q", got)
	}
	if got := datas("b", 10); len(got) != 1 {
		t.Errorf("deleting a's log touched b's: %q", got)
	}
}
