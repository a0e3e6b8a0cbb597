package sandbox

import (
	"context"
	"time"
)

// Metric is one resource reading of a sandbox, in the E2B wire's units.
// CPU and memory use are the host's view (the sandbox's cgroups); the page
// cache and disk use are the guest's (its agent's /metrics), zero when the
// agent does not answer in time.
type Metric struct {
	Timestamp  time.Time
	CPUCount   int
	CPUUsedPct float64
	MemUsed    uint64
	MemTotal   uint64
	MemCache   uint64
	DiskUsed   uint64
	DiskTotal  uint64
}

// firstSample is how long the first reading of a sandbox samples its CPU:
// there is no earlier reading to compare with, and the CPU time of its boot
// or restore would otherwise be charged to a few milliseconds.
const firstSample = 100 * time.Millisecond

// Metrics reads the sandbox's current resource use: one reading, none while
// the sandbox is not running. CPU percentage is over the time since the
// previous reading (the first reading samples briefly).
func (m *Manager) Metrics(ctx context.Context, id string) ([]Metric, error) {
	m.mu.Lock()
	e, err := m.lookupLocked(id)
	running := err == nil && e.state.Public() == PublicRunning
	m.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if !running {
		return []Metric{}, nil
	}
	if err := m.checkRunning(id); err != nil {
		return nil, err
	}
	if err := m.cpuBaseline(ctx, id); err != nil {
		return nil, err
	}
	st, err := m.rt.Stats(ctx, id)
	if err != nil {
		return nil, err
	}
	guest := m.guestUsage(ctx, id)
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if e, err = m.lookupLocked(id); err != nil {
		return nil, err
	}
	since, used := e.lastCPUTime, st.CPUUsage-e.lastCPU
	e.lastCPU, e.lastCPUTime = st.CPUUsage, now
	pct := 0.0
	cpus := max(e.rec.CPUCount, 1)
	if wall := now.Sub(since); wall > 0 {
		pct = 100 * float64(used) / float64(wall) / float64(cpus)
	}
	// The sandbox's own size, not the cgroup limit (which adds headroom).
	memTotal := uint64(e.rec.MemoryMB) << 20
	if memTotal == 0 {
		memTotal = st.MemoryLimitBytes
	}
	return []Metric{{
		Timestamp: now, CPUCount: cpus, CPUUsedPct: pct,
		MemUsed: st.MemoryBytes, MemTotal: memTotal, MemCache: guest.MemCache,
		DiskUsed: guest.DiskUsed, DiskTotal: uint64(e.rec.DiskSizeMB) << 20,
	}}, nil
}

// guestMetrics is the part of the agent's GET /metrics (envd's names) only
// the guest knows.
type guestMetrics struct {
	MemCache uint64 `json:"mem_cache"`
	DiskUsed uint64 `json:"disk_used"`
}

// guestUsage asks sandbox id's agent for its page cache and disk use, best
// effort and quick (half a second): a busy agent leaves them zero.
func (m *Manager) guestUsage(ctx context.Context, id string) guestMetrics {
	var out guestMetrics
	m.mu.Lock()
	e, err := m.lookupLocked(id)
	token := ""
	if err == nil {
		token = e.rec.EnvdAccessToken
	}
	m.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	err = m.agentGet(ctx, id, token, "/metrics", &out)
	if err != nil {
		m.log.Debug("guest metrics", "id", id, "err", err)
	}
	return out
}

// cpuBaseline takes the first CPU reading of a sandbox and waits
// firstSample, so the next reading has something to compare with.
func (m *Manager) cpuBaseline(ctx context.Context, id string) error {
	m.mu.Lock()
	e, err := m.lookupLocked(id)
	fresh := err == nil && e.lastCPUTime.IsZero()
	m.mu.Unlock()
	if err != nil || !fresh {
		return err
	}
	st, err := m.rt.Stats(ctx, id)
	if err != nil {
		return err
	}
	m.mu.Lock()
	e.lastCPU, e.lastCPUTime = st.CPUUsage, m.now()
	m.mu.Unlock()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(firstSample):
		return nil
	}
}
