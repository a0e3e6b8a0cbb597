package eventlog

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/forkbox/forkbox/internal/store"
)

// Rows is where a Shared log keeps its events: the cluster's database
// (*store.Store).
type Rows interface {
	AppendEvents(ctx context.Context, id string, rows []store.EventRow) error
	ListEvents(ctx context.Context, id string, limit int) ([]store.EventRow, error)
	LastEvent(ctx context.Context, id, logger string) (time.Time, error)
	TrimEvents(ctx context.Context, id string, keep int) error
	DeleteEvents(ctx context.Context, id string) error
	EventSandboxes(ctx context.Context, quiet time.Time) ([]string, error)
}

// Shared is a cluster's event log: the events of every sandbox in the
// cluster's database, so a sandbox's log reads the same through any node
// and outlives the node that wrote it. It has Log's methods; each is one
// or two database statements, bounded by a timeout since the log's
// callers (a slog handler among them) carry no context.
type Shared struct {
	rows    Rows
	max     int
	timeout time.Duration
	quiet   time.Duration
	now     func() time.Time

	mu      sync.Mutex
	appends map[string]int // appends per sandbox since its last trim
}

// SharedQuiet is how long a shared log must have had no write before IDs
// lists it: a sandbox another node is making logs before its record is
// written, and the event collection must not take it for an orphan.
const SharedQuiet = time.Minute

// OpenShared returns the log kept in rows, keeping at most max events per
// sandbox (0: DefaultMax).
func OpenShared(rows Rows, max int) *Shared {
	if max <= 0 {
		max = DefaultMax
	}
	return &Shared{rows: rows, max: max, timeout: 5 * time.Second, quiet: SharedQuiet, now: time.Now, appends: map[string]int{}}
}

func (l *Shared) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), l.timeout)
}

// Append adds events to sandbox id's log. The oldest events beyond the
// bound go every max/4 appends (a trim per append would double the
// writes).
func (l *Shared) Append(id string, evs ...Event) error {
	if len(evs) == 0 {
		return nil
	}
	rows := make([]store.EventRow, 0, len(evs))
	for _, ev := range evs {
		b, err := json.Marshal(ev)
		if err != nil {
			return fmt.Errorf("event log: %w", err)
		}
		rows = append(rows, store.EventRow{Time: ev.Time, Logger: ev.Logger, Data: b})
	}
	ctx, cancel := l.ctx()
	defer cancel()
	if err := l.rows.AppendEvents(ctx, id, rows); err != nil {
		return err
	}
	l.mu.Lock()
	l.appends[id] += len(evs)
	trim := l.appends[id] >= max(1, l.max/4)
	if trim {
		delete(l.appends, id)
	}
	l.mu.Unlock()
	if trim {
		return l.rows.TrimEvents(ctx, id, l.max)
	}
	return nil
}

// Events returns sandbox id's log, oldest first.
func (l *Shared) Events(id string) ([]Event, error) {
	ctx, cancel := l.ctx()
	defer cancel()
	rows, err := l.rows.ListEvents(ctx, id, l.max)
	if err != nil {
		return nil, err
	}
	evs := make([]Event, 0, len(rows))
	for _, r := range rows {
		var ev Event
		if json.Unmarshal(r.Data, &ev) == nil {
			evs = append(evs, ev)
		}
	}
	return evs, nil
}

// Last returns the time of the newest event of logger in id's log (zero
// when there is none, or when the database does not answer).
func (l *Shared) Last(id, logger string) time.Time {
	ctx, cancel := l.ctx()
	defer cancel()
	t, _ := l.rows.LastEvent(ctx, id, logger)
	return t
}

// Remove deletes sandbox id's log.
func (l *Shared) Remove(id string) error {
	l.mu.Lock()
	delete(l.appends, id)
	l.mu.Unlock()
	ctx, cancel := l.ctx()
	defer cancel()
	return l.rows.DeleteEvents(ctx, id)
}

// IDs lists the sandboxes that have a log without a write for SharedQuiet,
// sorted.
func (l *Shared) IDs() ([]string, error) {
	ctx, cancel := l.ctx()
	defer cancel()
	return l.rows.EventSandboxes(ctx, l.now().Add(-l.quiet))
}
