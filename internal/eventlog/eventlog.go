// Package eventlog keeps each sandbox's event log — lifecycle changes,
// processes started and ended, agent warnings — as the sandbox logs E2B's
// API serves. A sandbox's log is bounded (the oldest events go first),
// survives pause/resume and daemon restarts (one JSON-lines file per
// sandbox under the log's directory) and is removed with the sandbox.
package eventlog

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// Levels, lowest first.
const (
	LevelDebug = "debug"
	LevelInfo  = "info"
	LevelWarn  = "warn"
	LevelError = "error"
)

// Loggers name where an event comes from (the `logger` key of E2B's legacy
// log lines).
const (
	// LoggerLifecycle marks the daemon's lifecycle events.
	LoggerLifecycle = "forkbox.lifecycle"
	// LoggerAgent marks events the sandbox's agent reported.
	LoggerAgent = "forkbox.agent"
	// LoggerEgress marks connection attempts the sandbox's egress rules
	// refused.
	LoggerEgress = "forkbox.egress"
)

// DefaultMax is how many events a sandbox keeps by default.
const DefaultMax = 2000

// Event is one entry of a sandbox's log.
type Event struct {
	Time    time.Time         `json:"time"`
	Level   string            `json:"level"`
	Logger  string            `json:"logger"`
	Message string            `json:"message"`
	Fields  map[string]string `json:"fields,omitempty"`
}

// Log holds the event logs of every sandbox. It is safe for concurrent use.
type Log struct {
	dir string // "" keeps logs in memory only
	max int

	mu   sync.Mutex
	logs map[string]*sandboxLog
}

type sandboxLog struct {
	events  []Event
	written int // lines in the file, to know when to compact it
}

// Open returns the log kept under dir ("" for memory only), keeping at most
// max events per sandbox (0: DefaultMax).
func Open(dir string, max int) (*Log, error) {
	if max <= 0 {
		max = DefaultMax
	}
	if dir != "" {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("event log dir: %w", err)
		}
	}
	return &Log{dir: dir, max: max, logs: map[string]*sandboxLog{}}, nil
}

// Append adds events to sandbox id's log, oldest first.
func (l *Log) Append(id string, evs ...Event) error {
	if len(evs) == 0 {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	sl, err := l.loadLocked(id)
	if err != nil {
		return err
	}
	sl.events = append(sl.events, evs...)
	// Sources are collected at different times (an agent's events when the
	// log is read): the log is kept in time order whatever the arrival.
	sortByTime(sl.events)
	if n := len(sl.events); n > l.max {
		sl.events = slices.Clone(sl.events[n-l.max:])
	}
	if l.dir == "" {
		return nil
	}
	if sl.written+len(evs) > 2*l.max {
		return l.rewriteLocked(id, sl)
	}
	sl.written += len(evs)
	return appendLines(l.path(id), evs)
}

// Events returns a copy of sandbox id's log, oldest first.
func (l *Log) Events(id string) ([]Event, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	sl, err := l.loadLocked(id)
	if err != nil {
		return nil, err
	}
	return slices.Clone(sl.events), nil
}

// Last returns the time of the newest event of logger in id's log (zero
// when there is none): where to continue reading that source from.
func (l *Log) Last(id, logger string) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	sl, err := l.loadLocked(id)
	if err != nil {
		return time.Time{}
	}
	for i := len(sl.events) - 1; i >= 0; i-- {
		if sl.events[i].Logger == logger {
			return sl.events[i].Time
		}
	}
	return time.Time{}
}

// Remove deletes sandbox id's log.
func (l *Log) Remove(id string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.logs, id)
	if l.dir == "" {
		return nil
	}
	if err := os.Remove(l.path(id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove event log of %s: %w", id, err)
	}
	return nil
}

// IDs lists the sandboxes that have a log (in memory or on disk), sorted.
func (l *Log) IDs() ([]string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	set := map[string]bool{}
	for id := range l.logs {
		set[id] = true
	}
	if l.dir != "" {
		ents, err := os.ReadDir(l.dir)
		if err != nil {
			return nil, fmt.Errorf("event logs: %w", err)
		}
		for _, e := range ents {
			if id, ok := strings.CutSuffix(e.Name(), ".jsonl"); ok {
				set[id] = true
			}
		}
	}
	ids := make([]string, 0, len(set))
	for id := range set {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids, nil
}

func (l *Log) path(id string) string { return filepath.Join(l.dir, id+".jsonl") }

// loadLocked returns id's log, reading its file the first time.
func (l *Log) loadLocked(id string) (*sandboxLog, error) {
	if strings.ContainsAny(id, `/\`) || id == "" || id == "." || id == ".." {
		return nil, fmt.Errorf("bad sandbox id %q for the event log", id)
	}
	if sl, ok := l.logs[id]; ok {
		return sl, nil
	}
	sl := &sandboxLog{}
	if l.dir != "" {
		evs, lines, err := readLines(l.path(id))
		if err != nil {
			return nil, err
		}
		sortByTime(evs)
		if n := len(evs); n > l.max {
			evs = evs[n-l.max:]
		}
		sl.events, sl.written = evs, lines
	}
	l.logs[id] = sl
	return sl, nil
}

// rewriteLocked replaces id's file with its kept events.
func (l *Log) rewriteLocked(id string, sl *sandboxLog) error {
	tmp := l.path(id) + ".tmp"
	os.Remove(tmp)
	if err := appendLines(tmp, sl.events); err != nil {
		return err
	}
	if err := os.Rename(tmp, l.path(id)); err != nil {
		return fmt.Errorf("compact event log of %s: %w", id, err)
	}
	sl.written = len(sl.events)
	return nil
}

func appendLines(path string, evs []Event) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("event log: %w", err)
	}
	w := bufio.NewWriter(f)
	enc := json.NewEncoder(w)
	for _, ev := range evs {
		if err := enc.Encode(ev); err != nil {
			f.Close()
			return fmt.Errorf("event log: %w", err)
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return fmt.Errorf("event log: %w", err)
	}
	return f.Close()
}

// readLines reads a log file; a torn last line (a crash mid-write) is
// skipped.
func readLines(path string) ([]Event, int, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("event log: %w", err)
	}
	defer f.Close()
	var evs []Event
	lines := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		lines++
		var ev Event
		if json.Unmarshal(sc.Bytes(), &ev) == nil {
			evs = append(evs, ev)
		}
	}
	return evs, lines, sc.Err()
}

// sortByTime orders evs oldest first, keeping the order of equal times.
func sortByTime(evs []Event) {
	if !slices.IsSortedFunc(evs, compareTime) {
		slices.SortStableFunc(evs, compareTime)
	}
}

func compareTime(a, b Event) int { return a.Time.Compare(b.Time) }
