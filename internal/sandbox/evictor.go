package sandbox

import (
	"context"
	"sync"
	"time"

	"github.com/forkbox/forkbox/internal/runtime"
)

// Run expires sandboxes whose deadline has passed, sweeping every
// SweepInterval until ctx ends. Expiry claims the sandbox like any other
// operation, so a sweep never fights a user request and never evicts twice.
func (m *Manager) Run(ctx context.Context) {
	t := time.NewTicker(m.cfg.SweepInterval)
	defer t.Stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer m.drainPools(ctx)
	m.pool.runCtx.Store(&ctx)
	m.fillPools(ctx)
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			m.sweep(ctx, &wg)
			m.fillPools(ctx)
			if n%collectEvery == 0 {
				m.collectSnapshots(ctx)
				m.collectEventLogs(ctx)
			}
		}
	}
}

// collectEvery is how many sweeps pass between collections of snapshots and
// event logs: nothing is urgent about removing them.
const collectEvery = 10

// maxConcurrentEvictions bounds runtime work started by one sweep.
const maxConcurrentEvictions = 8

// sweep claims every expired running sandbox and pauses (autoPause) or
// destroys it in the background with bounded concurrency.
func (m *Manager) sweep(ctx context.Context, wg *sync.WaitGroup) {
	_, canPause := m.rt.(runtime.Checkpointer)
	for _, x := range m.expired() {
		to, action := StateKilling, "kill"
		if x.autoPause && canPause {
			to, action = StatePausing, "pause"
		}
		o, err := m.claim(ctx, x.id, to, StateRunning)
		if err != nil {
			continue // someone else is acting on it: they win
		}
		m.evictSem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-m.evictSem }()
			// action is E2B's onTimeout value (the sandbox's log shows it).
			m.log.Info("sandbox expired", "sandbox", x.id, "action", action)
			if to == StatePausing {
				m.observeAutoPause(context.WithoutCancel(ctx), o, OpEvict)
				return
			}
			// destroy's own outcome: reading the state afterwards would
			// race the next operation on the id (as it did for pauses).
			start := m.now()
			m.observe(OpEvict, start, m.destroy(ctx, o))
		}()
	}
}

type expiry struct {
	id        string
	autoPause bool
}

// expired lists running sandboxes whose deadline has passed.
func (m *Manager) expired() []expiry {
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []expiry
	for id, e := range m.boxes {
		if e.state == StateRunning && !now.Before(e.rec.EndAt) {
			out = append(out, expiry{id, e.rec.AutoPause})
		}
	}
	return out
}
