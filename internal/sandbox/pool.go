package sandbox

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/images"
	"github.com/forkbox/forkbox/internal/runtime"
	"github.com/forkbox/forkbox/internal/store"
)

// pool keeps a few sandboxes per template restored ahead of time, so a
// create only has to hand one over and initialise its agent instead of
// waiting for a restore. Pooled sandboxes exist only in the runtime: they
// are in no record, so a restarted daemon removes them as orphans.
//
// Two kinds of templates have a pool: Config.PoolTemplates (the built-in
// ones, always) and the Config.PoolRecent user templates most recently
// built or created from (pool_recent.go), which come and go.
type pool struct {
	mu    sync.Mutex
	ready map[string][]pooled // template id → restored sandboxes; guarded by mu
	// recent are the user templates with a pool, most recently used
	// first; guarded by mu.
	recent []string
	// closed is set by drainPools: no filler starts after it; guarded by mu.
	closed bool
	// filling is set while the filler runs; pending asks it for one more
	// pass (a kick that came while it was busy).
	filling, pending atomic.Bool
	// filler is the running filler goroutine: drainPools waits for it, or
	// a restore finishing after the drain would leave a sandbox that no
	// record and no pool lists running after the daemon stopped.
	filler sync.WaitGroup
	// restoring is held across one pool restore and its put, and by
	// reconcilePool (pool_recent.go).
	restoring sync.Mutex
	// runCtx is Run's context, which fills started outside Run (kicks)
	// use; nil before Run.
	runCtx atomic.Pointer[context.Context]
}

// pooled is one restored sandbox and the image it was restored from (its
// content ref): a template rebuilt since has a new image, and its old
// sandboxes are stale. A pooled sandbox holds its template's content
// (sandboxHolder of its id), as the sandbox a create makes of it does.
type pooled struct{ id, image string }

// imageOf names the image tpl's sandboxes are restored from ("" if none).
func imageOf(tpl *store.Template) string {
	if ref, ok := images.Find(tpl.Content, images.KindTemplateImage); ok {
		return ref.String()
	}
	return ""
}

// poolable reports whether req may be served from the pool: the pooled
// sandboxes were restored with the template's limits, disk size and
// internet access.
func poolable(req CreateRequest, tpl *store.Template) bool {
	return tpl.Kind == store.KindTemplate && imageOf(tpl) != "" &&
		req.CPUCount == 0 && req.MemoryMB == 0 && (req.DiskSizeMB == 0 || req.DiskSizeMB == tpl.DiskSizeMB) &&
		(req.AllowInternet == nil || *req.AllowInternet) && req.Network == nil &&
		len(req.VolumeMounts) == 0 // a pooled sandbox runs without volumes
}

// take removes a ready sandbox of template id restored from image from
// the pool ("" if none); sandboxes of other images are removed too and
// returned for the caller to delete.
func (p *pool) take(id, image string) (string, []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var stale []string
	for len(p.ready[id]) > 0 {
		x := p.ready[id][0]
		p.ready[id] = p.ready[id][1:]
		if x.image == image {
			return x.id, stale
		}
		stale = append(stale, x.id)
	}
	return "", stale
}

// put adds a restored sandbox to template tplID's pool unless the pool is
// closed or tplID (a user template, static false) has lost its pool.
func (p *pool) put(tplID string, x pooled, static bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || (!static && !slices.Contains(p.recent, tplID)) {
		return false
	}
	if p.ready == nil {
		p.ready = map[string][]pooled{}
	}
	p.ready[tplID] = append(p.ready[tplID], x)
	return true
}

func (p *pool) size(tplID string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.ready[tplID])
}

// total is how many sandboxes every pool holds.
func (p *pool) total() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, ids := range p.ready {
		n += len(ids)
	}
	return n
}

// removeWhere takes out of template tplID's pool the sandboxes drop
// selects and returns their ids.
func (p *pool) removeWhere(tplID string, drop func(pooled) bool) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	left := slices.DeleteFunc(p.ready[tplID], func(x pooled) bool {
		if drop(x) {
			out = append(out, x.id)
			return true
		}
		return false
	})
	if len(left) > 0 {
		p.ready[tplID] = left
	} else {
		delete(p.ready, tplID)
	}
	return out
}

// poolTemplates lists the templates whose pools are filled: the static ones,
// then the recent user templates.
func (m *Manager) poolTemplates() []string {
	m.pool.mu.Lock()
	defer m.pool.mu.Unlock()
	return append(slices.Clone(m.cfg.PoolTemplates), m.pool.recent...)
}

// fillPools tops up every pool in the background; one filler runs at a
// time, and a call while it runs makes it go round once more.
func (m *Manager) fillPools(ctx context.Context) {
	if m.cfg.PoolSize <= 0 || ctx.Err() != nil {
		return
	}
	m.pool.pending.Store(true)
	m.pool.mu.Lock()
	defer m.pool.mu.Unlock()
	if m.pool.closed || !m.pool.filling.CompareAndSwap(false, true) {
		return
	}
	m.pool.filler.Add(1)
	go func() {
		defer m.pool.filler.Done()
		for {
			for m.pool.pending.Swap(false) {
				for _, tplID := range m.poolTemplates() {
					m.fillPool(ctx, tplID)
				}
			}
			m.pool.filling.Store(false)
			// A kick between the last pass and the flag's reset found
			// the filler busy: take it over unless another filler has.
			if !m.pool.pending.Load() || !m.pool.filling.CompareAndSwap(false, true) {
				return
			}
		}
	}()
}

// kickPools starts a fill now (after a create took a pooled sandbox, or
// a user template got a pool) rather than at the next sweep.
func (m *Manager) kickPools() {
	if ctx := m.pool.runCtx.Load(); ctx != nil {
		m.fillPools(*ctx)
	}
}

func (m *Manager) fillPool(ctx context.Context, tplID string) {
	static := slices.Contains(m.cfg.PoolTemplates, tplID)
	for ctx.Err() == nil && m.restorePooled(ctx, tplID, static) {
	}
}

// restorePooled restores one sandbox into template tplID's pool if it
// has room; false when it did not (full, no room, or failed). It holds
// pool.restoring, and reads the template under it, so a reconcile that
// follows a rebuild or a delete finds the sandbox of an old image in the
// pool before that image's files may be collected.
func (m *Manager) restorePooled(ctx context.Context, tplID string, static bool) bool {
	m.pool.restoring.Lock()
	defer m.pool.restoring.Unlock()
	tpl, err := m.st.GetTemplate(ctx, tplID)
	if err != nil || !poolable(CreateRequest{}, tpl) ||
		m.pool.size(tplID) >= m.cfg.PoolSize || (!static && !m.userPoolRoom()) {
		return false
	}
	rec := m.newRecord(CreateRequest{}, tpl, m.cfg.DefaultTimeout)
	// Not cut short by ctx: a restore cancelled half-way could not be
	// undone with the cancelled ctx either. ctx stops the loop instead.
	if err := m.restoreForPool(context.WithoutCancel(ctx), tpl, &rec); err != nil {
		m.log.Warn("pool: restore failed", "template", tplID, "err", err)
		return false
	}
	// The pooled sandbox gets a plain create's /init now (no envs, no
	// token, its CPU count, the egress CA), so the warm-up's login shell is
	// started with what a create's first command will start with, and the
	// create's own /init, changing nothing, keeps it (and the CA is
	// installed off the create's path).
	if err := m.initAgent(ctx, &rec, ""); err != nil {
		m.log.Warn("pool: cannot init sandbox", "template", tplID, "sandbox", rec.ID, "err", err)
		m.deletePooled(ctx, []string{rec.ID})
		return false
	}
	m.warmPooled(ctx, rec.ID)
	if !m.pool.put(tplID, pooled{rec.ID, imageOf(tpl)}, static) {
		// Drained (shutdown) or the template lost its pool meanwhile.
		m.deletePooled(ctx, []string{rec.ID})
		return false
	}
	m.watchPooled(ctx, tplID, rec.ID, rec.MemoryMB)
	return true
}

// restoreForPool restores sandbox rec of tpl for the pool. It holds its
// template's content from the start; a failure lets go of it.
func (m *Manager) restoreForPool(ctx context.Context, tpl *store.Template, rec *store.Sandbox) error {
	cp, err := m.checkpointer()
	if err != nil {
		return err
	}
	if err := m.hold(ctx, sandboxHolder(rec.ID), rec.Content); err != nil {
		return err
	}
	image, err := m.templateImage(ctx, tpl)
	var spec runtime.Spec
	if err == nil && isFilesystemImage(image) {
		err = fmt.Errorf("template %s's image keeps only files: %w", tpl.ID, errdefs.ErrInvalidArgument)
	}
	if err == nil {
		spec, err = m.spec(ctx, rec)
	}
	if err == nil {
		_, err = cp.Restore(ctx, spec, image)
	}
	if err != nil {
		m.release(ctx, sandboxHolder(rec.ID))
	}
	return err
}

// drainPools deletes every pooled sandbox (on shutdown), once the filler,
// which must have seen ctx end, has returned.
func (m *Manager) drainPools(ctx context.Context) {
	m.pool.mu.Lock()
	m.pool.closed = true
	m.pool.mu.Unlock()
	m.pool.filler.Wait()
	for _, tplID := range m.pooledTemplates() {
		m.deletePooled(ctx, m.pool.removeWhere(tplID, func(pooled) bool { return true }))
	}
}

// pooledTemplates lists the templates that have pooled sandboxes now.
func (m *Manager) pooledTemplates() []string {
	m.pool.mu.Lock()
	defer m.pool.mu.Unlock()
	var out []string
	for id := range m.pool.ready {
		out = append(out, id)
	}
	return out
}

// deletePooled removes pooled sandboxes from the runtime and lets go of
// what they held.
func (m *Manager) deletePooled(ctx context.Context, ids []string) {
	for _, id := range ids {
		if err := m.rt.Delete(context.WithoutCancel(ctx), id); err != nil && !errdefs.IsNotFound(err) {
			m.log.Error("delete pooled sandbox", "sandbox", id, "err", err)
		}
		m.release(ctx, sandboxHolder(id))
	}
}
