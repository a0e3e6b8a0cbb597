package sandbox

import (
	"context"
	"slices"
	"time"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/store"
)

// User templates get a pool while they are among the Config.PoolRecent
// most recently built or created from: a create from one is then a
// hand-over, as from base. Their pools are bounded twice: PoolRecent
// templates of PoolSize sandboxes each, and only filled while the running
// and pooled sandboxes together stay under Config.MaxSandboxes (the quota
// is the host's memory divided among sandboxes; pooled ones use it too).
// A template deleted or rebuilt loses its pooled sandboxes before the
// build service collects the files they run on (ReconcilePools).

// isUserTemplate reports whether tpl may get a pool as a recent user
// template: a poolable template that is not one of the static pools.
func (m *Manager) isUserTemplate(tpl *store.Template) bool {
	return m.cfg.PoolRecent > 0 && m.cfg.PoolSize > 0 && poolable(CreateRequest{}, tpl) &&
		!slices.Contains(m.cfg.PoolTemplates, tpl.ID)
}

// userPoolRoom reports whether one more pooled sandbox of a user template
// fits under the quota.
func (m *Manager) userPoolRoom() bool {
	return m.cfg.MaxSandboxes <= 0 || m.Running()+m.pool.total() < m.cfg.MaxSandboxes
}

// takePooled hands over a pooled sandbox of tpl restored from its current
// image ("" if none); pooled sandboxes of an older image are deleted.
func (m *Manager) takePooled(ctx context.Context, tpl *store.Template) string {
	id, stale := m.pool.take(tpl.ID, imageOf(tpl))
	m.deletePooled(ctx, stale)
	if id != "" {
		m.stopPooledMemory(id)
	}
	return id
}

// usedTemplate notes a create from tpl: a user template moves to the front
// of the recent ones, and the pools are topped up once the new sandbox
// has had Config.PoolRefillDelay to run its first commands.
func (m *Manager) usedTemplate(ctx context.Context, tpl *store.Template) {
	if m.isUserTemplate(tpl) {
		m.touchRecent(ctx, tpl.ID)
	}
	if d := m.cfg.PoolRefillDelay; d > 0 {
		time.AfterFunc(d, m.kickPools)
		return
	}
	m.kickPools()
}

// touchRecent makes tplID the most recent user template; the least recent
// beyond Config.PoolRecent lose their pools.
func (m *Manager) touchRecent(ctx context.Context, tplID string) {
	m.pool.mu.Lock()
	r := slices.DeleteFunc(m.pool.recent, func(x string) bool { return x == tplID })
	r = append([]string{tplID}, r...)
	var evicted []string
	if len(r) > m.cfg.PoolRecent {
		evicted, r = slices.Clone(r[m.cfg.PoolRecent:]), r[:m.cfg.PoolRecent]
	}
	m.pool.recent = r
	m.pool.mu.Unlock()
	for _, id := range evicted {
		m.deletePooled(ctx, m.pool.removeWhere(id, func(pooled) bool { return true }))
	}
}

// WarmPool gives user template tplID a pool, just built (or rebuilt): its
// pooled sandboxes of an older image go at once, and new ones are
// restored in the background.
func (m *Manager) WarmPool(ctx context.Context, tplID string) {
	tpl, err := m.st.GetTemplate(ctx, tplID)
	if err != nil {
		return
	}
	m.reconcilePool(ctx, tplID)
	if m.isUserTemplate(tpl) {
		m.touchRecent(ctx, tplID)
	}
	m.kickPools()
}

// ReconcilePools deletes, before it returns, every pooled sandbox whose
// template is gone or has another image now: the build service calls it
// before it removes the files of deleted templates and replaced builds.
func (m *Manager) ReconcilePools(ctx context.Context) {
	ids := m.pooledTemplates()
	m.pool.mu.Lock()
	ids = append(ids, m.pool.recent...)
	m.pool.mu.Unlock()
	slices.Sort(ids)
	for _, id := range slices.Compact(ids) {
		m.reconcilePool(ctx, id)
	}
}

// reconcilePool is ReconcilePools for one template.
func (m *Manager) reconcilePool(ctx context.Context, tplID string) {
	m.pool.restoring.Lock()
	defer m.pool.restoring.Unlock()
	tpl, err := m.st.GetTemplate(ctx, tplID)
	switch {
	case errdefs.IsNotFound(err):
		m.pool.mu.Lock()
		m.pool.recent = slices.DeleteFunc(m.pool.recent, func(x string) bool { return x == tplID })
		m.pool.mu.Unlock()
		m.deletePooled(ctx, m.pool.removeWhere(tplID, func(pooled) bool { return true }))
	case err == nil:
		m.deletePooled(ctx, m.pool.removeWhere(tplID, func(x pooled) bool { return x.image != imageOf(tpl) }))
	}
}
