package sandbox

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/forkbox/forkbox/internal/store"
)

// pool keeps a few sandboxes per template restored ahead of time, so a
// create only has to hand one over and initialise its agent instead of
// waiting for a restore. Pooled sandboxes exist only in the runtime: they
// are in no record, so a restarted daemon removes them as orphans.
type pool struct {
	mu      sync.Mutex
	ready   map[string][]string // template id → restored sandbox ids; guarded by mu
	filling atomic.Bool
	// filler is the running filler goroutine: drainPools waits for it, or
	// a restore finishing after the drain would leave a sandbox that no
	// record and no pool lists running after the daemon stopped.
	filler sync.WaitGroup
}

// poolable reports whether req may be served from the pool: the pooled
// sandboxes were restored with the template's limits and internet access.
func poolable(req CreateRequest, tpl *store.Template) bool {
	return tpl.Kind == store.KindTemplate && tpl.ImageDir != "" &&
		req.CPUCount == 0 && req.MemoryMB == 0 &&
		(req.AllowInternet == nil || *req.AllowInternet) && req.Network == nil
}

// take removes a ready sandbox of template id from the pool ("" if none).
func (p *pool) take(id string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	ids := p.ready[id]
	if len(ids) == 0 {
		return ""
	}
	p.ready[id] = ids[1:]
	return ids[0]
}

func (p *pool) put(tplID, id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ready == nil {
		p.ready = map[string][]string{}
	}
	p.ready[tplID] = append(p.ready[tplID], id)
}

func (p *pool) size(tplID string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.ready[tplID])
}

// fillPools tops up the pools of Config.PoolTemplates in the background;
// one filler runs at a time.
func (m *Manager) fillPools(ctx context.Context) {
	if m.cfg.PoolSize <= 0 || !m.pool.filling.CompareAndSwap(false, true) {
		return
	}
	m.pool.filler.Add(1)
	go func() {
		defer m.pool.filler.Done()
		defer m.pool.filling.Store(false)
		for _, tplID := range m.cfg.PoolTemplates {
			m.fillPool(ctx, tplID)
		}
	}()
}

func (m *Manager) fillPool(ctx context.Context, tplID string) {
	tpl, err := m.st.GetTemplate(ctx, tplID)
	if err != nil || !poolable(CreateRequest{}, tpl) || !imageExists(tpl.ImageDir) {
		return
	}
	for m.pool.size(tplID) < m.cfg.PoolSize && ctx.Err() == nil {
		rec := m.newRecord(CreateRequest{}, tpl, m.cfg.DefaultTimeout)
		cp, err := m.checkpointer()
		if err != nil {
			return
		}
		// Not cut short by ctx: a restore cancelled half-way could not be
		// undone with the cancelled ctx either. ctx stops the loop instead.
		if _, err := cp.Restore(context.WithoutCancel(ctx), m.spec(&rec), tpl.ImageDir); err != nil {
			m.log.Warn("pool: restore failed", "template", tplID, "err", err)
			return
		}
		m.pool.put(tplID, rec.ID)
		m.watchPooled(ctx, tplID, rec.ID)
	}
}

// drainPools deletes every pooled sandbox (on shutdown), once the filler,
// which must have seen ctx end, has returned.
func (m *Manager) drainPools(ctx context.Context) {
	m.pool.filler.Wait()
	for _, tplID := range m.cfg.PoolTemplates {
		for id := m.pool.take(tplID); id != ""; id = m.pool.take(tplID) {
			m.rt.Delete(context.WithoutCancel(ctx), id)
		}
	}
}
