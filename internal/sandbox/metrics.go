package sandbox

import (
	"context"
	"time"
)

// Metric is one resource reading of a sandbox, in the E2B wire's units.
type Metric struct {
	Timestamp  time.Time
	CPUCount   int
	CPUUsedPct float64
	MemUsed    uint64
	MemTotal   uint64
	DiskUsed   uint64
	DiskTotal  uint64
}

// Metrics reads the sandbox's current resource use. CPU percentage is over
// the time since the previous reading (or since start).
func (m *Manager) Metrics(ctx context.Context, id string) ([]Metric, error) {
	if err := m.checkRunning(id); err != nil {
		return nil, err
	}
	st, err := m.rt.Stats(ctx, id)
	if err != nil {
		return nil, err
	}
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	e, err := m.lookupLocked(id)
	if err != nil {
		return nil, err
	}
	since, used := e.lastCPUTime, st.CPUUsage-e.lastCPU
	if since.IsZero() {
		since = e.rec.StartedAt
	}
	e.lastCPU, e.lastCPUTime = st.CPUUsage, now
	pct := 0.0
	cpus := max(e.rec.CPUCount, 1)
	if wall := now.Sub(since); wall > 0 {
		pct = 100 * float64(used) / float64(wall) / float64(cpus)
	}
	memTotal := st.MemoryLimitBytes
	if memTotal == 0 {
		memTotal = uint64(e.rec.MemoryMB) << 20
	}
	return []Metric{{
		Timestamp: now, CPUCount: cpus, CPUUsedPct: pct,
		MemUsed: st.MemoryBytes, MemTotal: memTotal,
		DiskTotal: uint64(e.rec.DiskSizeMB) << 20,
	}}, nil
}
