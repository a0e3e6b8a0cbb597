package sandbox

import (
	"context"
	"log/slog"
	"strconv"
	"time"

	"github.com/forkbox/forkbox/internal/eventlog"
)

// A sandbox's log (GET /sandboxes/{id}/logs) is built from two sources:
//   - the Manager's own log records that name a sandbox (the "sandbox"
//     attribute) at info level or above — created, paused, resumed,
//     snapshot taken, cloned, rolled back, expired, and the failures —
//     captured by lifecycleTee, so every operation that logs its outcome
//     also logs it to the sandbox;
//   - the agent's events (processes started and exited with their exit
//     code, the agent's warnings), collected from its GET /events when
//     the log is read and before the sandbox stops running.

// EventLog keeps every sandbox's event log: a node's files
// (*eventlog.Log) or a cluster's database (*eventlog.Shared), where any
// node reads the log of a sandbox another node ran.
type EventLog interface {
	// Append adds events to sandbox id's log.
	Append(id string, evs ...eventlog.Event) error
	// Events returns id's log, oldest first.
	Events(id string) ([]eventlog.Event, error)
	// Last is the time of the newest event of logger in id's log.
	Last(id, logger string) time.Time
	// Remove deletes id's log.
	Remove(id string) error
	// IDs lists the sandboxes with a log, for its collection.
	IDs() ([]string, error)
}

// lifecycleTee is a slog.Handler that also appends each record naming a
// sandbox to that sandbox's event log.
type lifecycleTee struct {
	slog.Handler
	events EventLog
	attrs  []slog.Attr
}

func (h lifecycleTee) Handle(ctx context.Context, rec slog.Record) error {
	if rec.Level >= slog.LevelInfo {
		h.record(rec)
	}
	return h.Handler.Handle(ctx, rec)
}

// Enabled keeps sandbox records flowing to the event log whatever the
// daemon's own log level.
func (h lifecycleTee) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelInfo || h.Handler.Enabled(ctx, l)
}

func (h lifecycleTee) record(rec slog.Record) {
	var id string
	fields := map[string]string{}
	add := func(a slog.Attr) bool {
		if a.Key == "sandbox" {
			id = a.Value.String()
		} else if a.Key != "" {
			fields[a.Key] = a.Value.String()
		}
		return true
	}
	for _, a := range h.attrs {
		add(a)
	}
	rec.Attrs(add)
	if id == "" {
		return
	}
	ev := eventlog.Event{
		Time: rec.Time, Level: levelName(rec.Level), Logger: eventlog.LoggerLifecycle,
		Message: rec.Message, Fields: fields,
	}
	if ev.Time.IsZero() {
		ev.Time = time.Now()
	}
	_ = h.events.Append(id, ev) // a full disk must not fail the operation
}

func (h lifecycleTee) WithAttrs(as []slog.Attr) slog.Handler {
	return lifecycleTee{h.Handler.WithAttrs(as), h.events, append(append([]slog.Attr{}, h.attrs...), as...)}
}

func (h lifecycleTee) WithGroup(name string) slog.Handler {
	return lifecycleTee{h.Handler.WithGroup(name), h.events, h.attrs}
}

func levelName(l slog.Level) string {
	switch {
	case l >= slog.LevelError:
		return eventlog.LevelError
	case l >= slog.LevelWarn:
		return eventlog.LevelWarn
	case l >= slog.LevelInfo:
		return eventlog.LevelInfo
	}
	return eventlog.LevelDebug
}

// withEventLog returns cfg's logger teed into the event log (made in
// memory when cfg names none).
func withEventLog(cfg *Config) error {
	if cfg.Events == nil {
		l, err := eventlog.Open("", 0)
		if err != nil {
			return err
		}
		cfg.Events = l
	}
	cfg.Logger = slog.New(lifecycleTee{Handler: cfg.Logger.Handler(), events: cfg.Events})
	return nil
}

// Logs returns sandbox id's events that q selects, after collecting what
// its agent has to add.
func (m *Manager) Logs(ctx context.Context, id string, q eventlog.Query) ([]eventlog.Event, error) {
	sb, err := m.Describe(ctx, id) // a sandbox that died keeps its log
	if err != nil {
		return nil, err
	}
	if sb.State == StateRunning {
		m.collectAgentEvents(ctx, id, sb.EnvdAccessToken)
	}
	evs, err := m.cfg.Events.Events(id)
	if err != nil {
		return nil, err
	}
	return eventlog.Select(evs, q), nil
}

// agentEvent is one entry of the agent's GET /events.
type agentEvent struct {
	Time    int64             `json:"time"`
	Level   string            `json:"level"`
	Message string            `json:"message"`
	Fields  map[string]string `json:"fields"`
}

// collectAgentEvents appends the agent's events newer than the last one
// collected. It is best effort and quick: an agent that does not answer
// within a second leaves its events for the next read.
func (m *Manager) collectAgentEvents(ctx context.Context, id, token string) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if err := m.fetchAgentEvents(ctx, id, token); err != nil {
		m.log.Debug("collect agent events", "id", id, "err", err)
	}
}

func (m *Manager) fetchAgentEvents(ctx context.Context, id, token string) error {
	after := m.cfg.Events.Last(id, eventlog.LoggerAgent)
	var ns int64
	if !after.IsZero() {
		ns = after.UnixNano()
	}
	var in []agentEvent
	if err := m.agentGet(ctx, id, token, "/events?after="+strconv.FormatInt(ns, 10), &in); err != nil {
		return err
	}
	evs := make([]eventlog.Event, 0, len(in))
	for _, a := range in {
		evs = append(evs, eventlog.Event{
			Time: time.Unix(0, a.Time), Level: a.Level, Logger: eventlog.LoggerAgent, Message: a.Message, Fields: a.Fields,
		})
	}
	return m.cfg.Events.Append(id, evs...)
}
