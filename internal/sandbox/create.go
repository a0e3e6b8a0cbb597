package sandbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/runtime"
	"github.com/forkbox/forkbox/internal/store"
)

// CreateRequest describes a sandbox to create.
type CreateRequest struct {
	// TemplateID is a template id or alias, or a snapshot id.
	TemplateID string
	// Timeout is the TTL; zero means the default.
	Timeout    time.Duration
	AutoPause  bool
	AutoResume bool
	// Secure makes the data plane require the sandbox's access token.
	Secure bool
	// PrivateTraffic makes ports other than the agent's require the
	// sandbox's traffic access token.
	PrivateTraffic bool
	// AllowInternet, when nil, defaults to true (E2B's default).
	AllowInternet *bool
	Metadata      map[string]string
	EnvVars       map[string]string
	// CPUCount and MemoryMB override the template's limits when > 0.
	CPUCount int
	MemoryMB int
}

// newID returns a fresh sandbox or template id.
func newID() string { return runtime.NewID() }

func newToken() string {
	b := make([]byte, 24)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// ttl validates a requested timeout; zero selects the default.
func (m *Manager) ttl(d time.Duration) (time.Duration, error) {
	switch {
	case d == 0:
		return m.cfg.DefaultTimeout, nil
	case d < 0:
		return 0, fmt.Errorf("timeout must be positive: %w", errdefs.ErrInvalidArgument)
	case d > m.cfg.MaxTimeout:
		return 0, fmt.Errorf("timeout %s exceeds the maximum %s: %w", d, m.cfg.MaxTimeout, errdefs.ErrInvalidArgument)
	}
	return d, nil
}

// Create starts a new sandbox from a template and returns it running, its
// agent initialised. On failure nothing is left behind.
func (m *Manager) Create(ctx context.Context, req CreateRequest) (*Sandbox, error) {
	if req.TemplateID == "" {
		return nil, fmt.Errorf("templateID is required: %w", errdefs.ErrInvalidArgument)
	}
	ttl, err := m.ttl(req.Timeout)
	if err != nil {
		return nil, err
	}
	tpl, err := m.st.GetTemplate(ctx, req.TemplateID)
	if err != nil {
		return nil, err
	}
	rec := m.newRecord(req, tpl, ttl)
	pooled := ""
	if poolable(req, tpl) {
		if pooled = m.pool.take(tpl.ID); pooled != "" {
			rec.ID = pooled
		}
	}
	e, err := m.register(ctx, rec)
	if err != nil {
		if pooled != "" {
			m.rt.Delete(context.WithoutCancel(ctx), pooled)
		}
		return nil, err
	}
	if pooled != "" {
		err = m.adoptPooled(ctx, rec)
	} else {
		err = m.boot(ctx, rec, tpl)
	}
	if err != nil {
		m.release(ctx, e, StateKilled, func(e *entry) { e.rec.Error = err.Error() })
		return nil, err
	}
	m.mu.Lock()
	// The TTL counts from when the sandbox is usable, not from the request.
	e.rec.StartedAt = m.now()
	e.rec.EndAt = e.rec.StartedAt.Add(ttl)
	m.mu.Unlock()
	m.release(ctx, e, StateRunning, nil)
	m.log.Info("sandbox created", "sandbox", rec.ID, "template", tpl.ID)
	return m.Get(ctx, rec.ID)
}

func (m *Manager) newRecord(req CreateRequest, tpl *store.Template, ttl time.Duration) store.Sandbox {
	now := m.now()
	rec := store.Sandbox{
		ID: newID(), TemplateID: tpl.ID, ClientID: m.cfg.ClientID,
		Metadata: cloneMap(req.Metadata), EnvVars: cloneMap(req.EnvVars),
		CPUCount: tpl.CPUCount, MemoryMB: tpl.MemoryMB, DiskSizeMB: tpl.DiskSizeMB,
		EnvdVersion: m.cfg.EnvdVersion, AutoPause: req.AutoPause, AutoResume: req.AutoResume,
		Secure: req.Secure || req.PrivateTraffic, PrivateTraffic: req.PrivateTraffic, AllowInternet: req.AllowInternet == nil || *req.AllowInternet,
		StartedAt: now, EndAt: now.Add(ttl), Origin: "create", RuntimeName: m.rt.Name(),
		RootFS: tpl.RootFS, AgentArgs: tpl.AgentArgs,
	}
	if len(tpl.Aliases) > 0 {
		rec.Alias = tpl.Aliases[0]
	}
	if tpl.Kind == store.KindSnapshot {
		rec.ParentID, rec.Origin = tpl.ID, "restore"
	}
	if req.CPUCount > 0 {
		rec.CPUCount = req.CPUCount
	}
	if req.MemoryMB > 0 {
		rec.MemoryMB = req.MemoryMB
	}
	if req.Secure {
		rec.EnvdAccessToken, rec.TrafficAccessToken = newToken(), newToken()
	}
	return rec
}

// register records a new sandbox in state creating, before any runtime work,
// so a daemon that dies mid-create finds the record and cleans up.
func (m *Manager) register(ctx context.Context, rec store.Sandbox) (*entry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, dup := m.boxes[rec.ID]; dup {
		return nil, fmt.Errorf("sandbox %s: %w", rec.ID, errdefs.ErrAlreadyExists)
	}
	e := &entry{rec: rec, state: StateCreating, done: make(chan struct{})}
	if err := m.persistLocked(ctx, e); err != nil {
		return nil, err
	}
	m.boxes[rec.ID] = e
	return e, nil
}

// spec builds the runtime spec for a sandbox record.
func (m *Manager) spec(rec *store.Sandbox) runtime.Spec {
	args := m.cfg.AgentArgs
	if len(rec.AgentArgs) > 0 {
		args = rec.AgentArgs
	}
	return runtime.Spec{
		ID: rec.ID, RootFS: rec.RootFS, Args: args,
		Hostname: "forkbox",
		Env:      []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
		Resources: runtime.Resources{
			CPUCount: rec.CPUCount, MemoryMB: rec.MemoryMB,
		},
		AllowInternet: rec.AllowInternet,
	}
}

// boot creates the sandbox in the runtime — a cold boot of a template, or a
// restore of a snapshot — and initialises its agent; on failure it removes
// what it made.
func (m *Manager) boot(ctx context.Context, rec store.Sandbox, tpl *store.Template) (err error) {
	switch {
	case tpl.ImageDir != "" && imageExists(tpl.ImageDir):
		return m.restore(ctx, rec, tpl.ImageDir, m.imageToken(ctx, tpl))
	case tpl.ImageDir != "" && tpl.Kind == store.KindSnapshot:
		return fmt.Errorf("snapshot %s has lost its image: %w", tpl.ID, errdefs.ErrNotFound)
	case tpl.ImageDir != "":
		// A template's image is only a shortcut past the cold boot; if it
		// went (another daemon build removed it), boot the slow way.
		m.log.Warn("template image missing; cold boot", "template", tpl.ID, "image", tpl.ImageDir)
	}
	spec := m.spec(&rec)
	if _, err := m.rt.Create(ctx, spec); err != nil {
		return fmt.Errorf("create sandbox %s: %w", spec.ID, err)
	}
	defer func() {
		if err != nil {
			if derr := m.rt.Delete(context.WithoutCancel(ctx), spec.ID); derr != nil {
				m.log.Error("undo create", "sandbox", spec.ID, "err", derr)
			}
		}
	}()
	return m.initAgent(ctx, &rec, "")
}

// adoptPooled initialises the agent of a sandbox taken from the pool; on
// failure the sandbox is removed.
func (m *Manager) adoptPooled(ctx context.Context, rec store.Sandbox) error {
	if err := m.initAgent(ctx, &rec, ""); err != nil {
		m.rt.Delete(context.WithoutCancel(ctx), rec.ID)
		return err
	}
	return nil
}
