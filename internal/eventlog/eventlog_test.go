package eventlog

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func events(from, n int) []Event {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var out []Event
	for i := from; i < from+n; i++ {
		lvl := LevelInfo
		if i%3 == 0 {
			lvl = LevelWarn
		}
		out = append(out, Event{Time: t0.Add(time.Duration(i) * time.Second), Level: lvl, Logger: LoggerLifecycle,
			Message: fmt.Sprintf("event %d", i), Fields: map[string]string{"n": fmt.Sprint(i)}})
	}
	return out
}

// A log is bounded, survives a reopen (a daemon restart), and compacts its
// file instead of growing it forever.
func TestBoundedAndPersistent(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(dir, 10)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 50; i += 5 {
		if err := l.Append("sb1", events(i, 5)...); err != nil {
			t.Fatal(err)
		}
	}
	got, _ := l.Events("sb1")
	if len(got) != 10 || got[0].Message != "event 40" || got[9].Message != "event 49" {
		t.Fatalf("kept %d events: %v … %v", len(got), got[0].Message, got[len(got)-1].Message)
	}
	l2, _ := Open(dir, 10)
	again, _ := l2.Events("sb1")
	if len(again) != 10 || again[0].Message != "event 40" || again[9].Fields["n"] != "49" {
		t.Fatalf("after reopen: %d events, first %v", len(again), again)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "sb1.jsonl"))
	if lines := len(splitLines(b)); lines > 20 {
		t.Errorf("file has %d lines, want ≤ 2×max", lines)
	}
	if got := l2.Last("sb1", LoggerLifecycle); !got.Equal(again[9].Time) {
		t.Errorf("Last = %v", got)
	}
	if err := l2.Remove("sb1"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "sb1.jsonl")); !os.IsNotExist(err) {
		t.Errorf("file left after Remove: %v", err)
	}
	if _, err := l2.Events("../x"); err == nil {
		t.Error("a path-like id was accepted")
	}
}

func splitLines(b []byte) [][]byte {
	var out [][]byte
	start := 0
	for i, c := range b {
		if c == '\n' {
			out = append(out, b[start:i])
			start = i + 1
		}
	}
	return out
}

func TestSelect(t *testing.T) {
	evs := events(0, 10)
	for _, tc := range []struct {
		name string
		q    Query
		want []string
	}{
		{"limit", Query{Limit: 2}, []string{"0", "1"}},
		{"backward", Query{Backward: true, Limit: 2}, []string{"9", "8"}},
		{"cursor forward", Query{Cursor: evs[7].Time}, []string{"7", "8", "9"}},
		{"cursor backward", Query{Cursor: evs[1].Time, Backward: true}, []string{"1", "0"}},
		{"level", Query{Level: LevelWarn}, []string{"0", "3", "6", "9"}},
		{"search message", Query{Search: "event 5"}, []string{"5"}},
		{"search is case-sensitive", Query{Search: "EVENT 5"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, ev := range Select(evs, tc.q) {
				got = append(got, ev.Fields["n"])
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// Events that arrive late (an agent's, collected when the log is read)
// take their place by time.
func TestAppendKeepsTimeOrder(t *testing.T) {
	l, _ := Open(t.TempDir(), 10)
	evs := events(0, 4)
	l.Append("sb", evs[0], evs[3])
	l.Append("sb", evs[1], evs[2])
	got, _ := l.Events("sb")
	for i, ev := range got {
		if ev.Message != evs[i].Message {
			t.Fatalf("order: %v", got)
		}
	}
}
