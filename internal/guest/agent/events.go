package agent

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// maxAgentEvents bounds the events the agent holds until the daemon
// collects them into the sandbox's log.
const maxAgentEvents = 1000

// agentEvent is one entry of GET /events: a process started or ended, or
// a warning the agent logged.
type agentEvent struct {
	// Time is Unix nanoseconds: the daemon continues after the last one it
	// has (a restored or rolled-back agent's clock keeps moving forward).
	Time    int64             `json:"time"`
	Level   string            `json:"level"`
	Message string            `json:"message"`
	Fields  map[string]string `json:"fields,omitempty"`
}

// eventRing keeps the newest maxAgentEvents events.
type eventRing struct {
	mu     sync.Mutex
	events []agentEvent
	last   int64
}

func (r *eventRing) add(level, msg string, fields map[string]string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t := time.Now().UnixNano()
	if t <= r.last {
		t = r.last + 1 // strictly increasing: the daemon reads "after" a time
	}
	r.last = t
	r.events = append(r.events, agentEvent{Time: t, Level: level, Message: msg, Fields: fields})
	if n := len(r.events); n > maxAgentEvents {
		r.events = append([]agentEvent(nil), r.events[n-maxAgentEvents:]...)
	}
}

func (r *eventRing) after(t int64) []agentEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := []agentEvent{}
	for _, ev := range r.events {
		if ev.Time > t {
			out = append(out, ev)
		}
	}
	return out
}

// handleEvents is GET /events?after=<unix ns>: the agent's events after
// that time, oldest first.
func (a *Agent) handleEvents(w http.ResponseWriter, r *http.Request) {
	after, _ := strconv.ParseInt(r.URL.Query().Get("after"), 10, 64)
	writeJSON(w, http.StatusOK, a.events.after(after))
}

// processStarted and processEnded record a process's life.
func (a *Agent) processStarted(p *managedProc) {
	cfg := p.config
	f := map[string]string{"pid": strconv.FormatUint(uint64(p.pid), 10), "cmd": cfg.GetCmd()}
	if len(cfg.GetArgs()) > 0 {
		f["args"] = joinArgs(cfg.GetArgs())
	}
	if p.tag != nil {
		f["tag"] = *p.tag
	}
	a.events.add("info", "process started: "+commandLine(cfg.GetCmd(), cfg.GetArgs()), f)
}

func (a *Agent) processEnded(p *managedProc, exitCode int32, status string) {
	cfg := p.config
	f := map[string]string{
		"pid": strconv.FormatUint(uint64(p.pid), 10), "cmd": cfg.GetCmd(),
		"exitCode": strconv.Itoa(int(exitCode)), "status": status,
	}
	level := "info"
	if exitCode != 0 {
		level = "warn"
	}
	a.events.add(level, "process exited with code "+strconv.Itoa(int(exitCode))+": "+commandLine(cfg.GetCmd(), cfg.GetArgs()), f)
}

func commandLine(cmd string, args []string) string {
	if len(args) == 0 {
		return cmd
	}
	return cmd + " " + joinArgs(args)
}

func joinArgs(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = strconv.Quote(a)
	}
	return strings.Join(q, " ")
}

// warnTee is a slog.Handler that also records the agent's warnings and
// errors as events.
type warnTee struct {
	slog.Handler
	ring *eventRing
}

func (h warnTee) Handle(ctx context.Context, rec slog.Record) error {
	if rec.Level >= slog.LevelWarn {
		f := map[string]string{}
		rec.Attrs(func(at slog.Attr) bool { f[at.Key] = at.Value.String(); return true })
		level := "warn"
		if rec.Level >= slog.LevelError {
			level = "error"
		}
		h.ring.add(level, rec.Message, f)
	}
	return h.Handler.Handle(ctx, rec)
}

func (h warnTee) WithAttrs(as []slog.Attr) slog.Handler {
	return warnTee{h.Handler.WithAttrs(as), h.ring}
}

func (h warnTee) WithGroup(name string) slog.Handler {
	return warnTee{h.Handler.WithGroup(name), h.ring}
}
