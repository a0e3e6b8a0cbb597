package sandbox

import (
	"context"
	"time"
)

// Operation names a Manager operation for an Observer.
type Operation string

// The operations an Observer hears about.
const (
	OpCreate   Operation = "create"
	OpPause    Operation = "pause"
	OpResume   Operation = "resume"
	OpSnapshot Operation = "snapshot"
	OpClone    Operation = "clone"
	OpRollback Operation = "rollback"
	OpKill     Operation = "kill"
	OpEvict    Operation = "evict" // a TTL expiry: a pause or a kill
)

// Operations lists every Operation (for metrics to pre-declare series).
var Operations = []Operation{OpCreate, OpPause, OpResume, OpSnapshot, OpClone, OpRollback, OpKill, OpEvict}

// Observer hears of each operation as it ends: how long it took and its
// error (nil on success). It is called on the operation's goroutine and
// must not block or call back into the Manager.
type Observer interface {
	Observe(op Operation, d time.Duration, err error)
}

// observe reports an operation that started at start.
func (m *Manager) observe(op Operation, start time.Time, err error) {
	if m.cfg.Observer != nil {
		m.cfg.Observer.Observe(op, m.now().Sub(start), err)
	}
}

// finishPauseObserved is finishPause reported as op, with the outcome
// finishPause returns (reading the state afterwards would race the next
// claim, e.g. a clone of the freshly paused sandbox).
func (m *Manager) finishPauseObserved(ctx context.Context, o *op, op Operation) {
	start := m.now()
	m.observe(op, start, m.finishPause(ctx, o))
}

// Counts is what the Manager holds now, for metrics.
type Counts struct {
	// ByState counts live sandboxes by precise state.
	ByState map[State]int
	// CommittedMemoryMB sums the memory limits of the sandboxes counted
	// against MaxSandboxes (the host memory they may use).
	CommittedMemoryMB int
	// Pool counts the sandboxes restored ahead, by template.
	Pool map[string]int
	// Gate is the agent gate's state (gate.go).
	Gate GateCounts
}

// Counts returns the Manager's current counts.
func (m *Manager) Counts() Counts {
	c := Counts{ByState: map[State]int{}, Pool: map[string]int{}, Gate: m.gate.counts()}
	for _, tpl := range m.poolTemplates() {
		c.Pool[tpl] = m.pool.size(tpl)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, e := range m.boxes {
		c.ByState[e.state]++
		if e.state != StatePaused && e.state != StatePausing {
			c.CommittedMemoryMB += e.rec.MemoryMB
		}
	}
	return c
}
