package sandbox

import (
	"fmt"

	"github.com/forkbox/forkbox/internal/errdefs"
)

// QuotaMessage starts the error of an operation refused by
// Config.MaxSandboxes (E2B's wording of its concurrency limit).
const QuotaMessage = "sandbox count may not exceed the concurrent-sandbox limit"

// admit refuses, before anything is made, an operation that would start n
// more running sandboxes than Config.MaxSandboxes allows. Creates, resumes,
// forks and clones check it up front; register and the resume claim check
// again under the lock, so concurrent operations cannot overshoot together.
func (m *Manager) admit(n int) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.admitLocked(n)
}

// admitLocked is admit for callers holding m.mu.
func (m *Manager) admitLocked(n int) error {
	limit := m.cfg.MaxSandboxes
	if limit <= 0 {
		return nil
	}
	if running := m.runningLocked(); running+n > limit {
		return fmt.Errorf("%s of %d (%d running, %d more asked for): %w",
			QuotaMessage, limit, running, n, errdefs.ErrResourceExhausted)
	}
	return nil
}

// admitClaimLocked checks the quota for a claim moving a sandbox from prev
// to to: only a resume of a paused sandbox starts one more.
func (m *Manager) admitClaimLocked(prev, to State) error {
	if prev == StatePaused && to == StateResuming {
		return m.admitLocked(1)
	}
	return nil
}

// runningLocked counts the sandboxes that hold a running runtime sandbox or
// are about to: every live one the API shows as running. A sandbox being
// paused is not counted (clients see it paused once pause answers, and it
// is checkpointed within a second); should its pause fail it runs on, one
// over the limit until something ends. Nor are sandboxes snapshotted while
// paused, or pooled ones: they are the daemon's, and a create that takes
// one makes no new one.
func (m *Manager) runningLocked() int {
	n := 0
	for _, e := range m.boxes {
		switch {
		case e.state == StatePaused, e.state == StatePausing, e.state == StateKilled:
		case e.state == StateSnapshotting && e.from == StatePaused:
		default:
			n++
		}
	}
	return n
}

// Running is how many sandboxes count against Config.MaxSandboxes now.
func (m *Manager) Running() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.runningLocked()
}

// MaxSandboxes is the concurrent-sandbox limit (0: none).
func (m *Manager) MaxSandboxes() int { return m.cfg.MaxSandboxes }
