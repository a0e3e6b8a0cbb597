package eventlog

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/forkbox/forkbox/internal/store"
)

// eventLog is what Log and Shared both are, for the suite below.
type eventLog interface {
	Append(id string, evs ...Event) error
	Events(id string) ([]Event, error)
	Last(id, logger string) time.Time
	Remove(id string) error
	IDs() ([]string, error)
}

func openSQLite(t *testing.T) *store.Store {
	t.Helper()
	st, err := store.OpenPath(context.Background(), filepath.Join(t.TempDir(), "forkbox.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// TestLogs: a sandbox's log reads the same from a node's files and from a
// cluster's database: bounded to its newest events, in time order
// whatever order they came in, with the last time of each source, and
// gone when removed.
func TestLogs(t *testing.T) {
	for _, impl := range []struct {
		name string
		open func(t *testing.T) eventLog
	}{
		{"files", func(t *testing.T) eventLog { l, _ := Open(t.TempDir(), 10); return l }},
		{"memory", func(t *testing.T) eventLog { l, _ := Open("", 10); return l }},
		{"shared", func(t *testing.T) eventLog { return OpenShared(openSQLite(t), 10) }},
	} {
		t.Run(impl.name, func(t *testing.T) {
			l := impl.open(t)
			evs := events(0, 50)
			l.Append("sb", evs[3], evs[0])
			l.Append("sb", evs[1], evs[2])
			got, err := l.Events("sb")
			if err != nil || len(got) != 4 || got[0].Message != "event 0" || got[3].Message != "event 3" || got[2].Fields["n"] != "2" {
				t.Fatalf("late events out of place: %v %v", got, err)
			}
			for i := 4; i < 50; i += 5 {
				if err := l.Append("sb", evs[i:min(i+5, 50)]...); err != nil {
					t.Fatal(err)
				}
			}
			got, _ = l.Events("sb")
			if len(got) != 10 || got[0].Message != "event 40" || got[9].Message != "event 49" {
				t.Fatalf("kept %d events: %v", len(got), got)
			}
			if last := l.Last("sb", LoggerLifecycle); !last.Equal(evs[49].Time) {
				t.Errorf("Last = %v, want %v", last, evs[49].Time)
			}
			if last := l.Last("sb", LoggerAgent); !last.IsZero() {
				t.Errorf("Last of a source with no event = %v", last)
			}
			l.Append("other", evs[0])
			if err := l.Remove("sb"); err != nil {
				t.Fatal(err)
			}
			if got, _ := l.Events("sb"); len(got) != 0 {
				t.Errorf("events after Remove: %v", got)
			}
			if got, _ := l.Events("other"); len(got) != 1 {
				t.Errorf("Remove of sb took other's log: %v", got)
			}
		})
	}
}

// TestSharedBoundsRows: the database holds not much more than the bound
// of a sandbox's events, and IDs lists a log only once no write came for
// SharedQuiet (another node's sandbox may log before its record exists).
func TestSharedBoundsRows(t *testing.T) {
	st := openSQLite(t)
	l := OpenShared(st, 8)
	for i := 0; i < 100; i += 3 {
		if err := l.Append("sb", events(i, 3)...); err != nil {
			t.Fatal(err)
		}
	}
	rows, err := st.ListEvents(context.Background(), "sb", 1000)
	if err != nil || len(rows) > 8+8/4+3 {
		t.Errorf("%d rows of a log bounded to 8 (%v)", len(rows), err)
	}
	if ids, err := l.IDs(); err != nil || len(ids) != 0 {
		t.Errorf("a log just written is listed: %q %v", ids, err)
	}
	l.now = func() time.Time { return time.Now().Add(SharedQuiet + time.Second) }
	if ids, err := l.IDs(); err != nil || !slices.Equal(ids, []string{"sb"}) {
		t.Errorf("a quiet log: %q %v", ids, err)
	}
}
