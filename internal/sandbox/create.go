package sandbox

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/netpolicy"
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
	// AutoPauseFilesOnly makes the timeout's pause keep only the files
	// (E2B's onTimeout keepMemory: false).
	AutoPauseFilesOnly bool
	// Secure makes the data plane require the sandbox's access token.
	Secure bool
	// PrivateTraffic makes ports other than the agent's require the
	// sandbox's traffic access token.
	PrivateTraffic bool
	// AllowInternet, when nil, defaults to true (E2B's default).
	AllowInternet *bool
	// Network is the egress rules; with AllowInternet nil too, a sandbox
	// created from a snapshot inherits its source's.
	Network *netpolicy.Rules
	// Inbound is maskRequestHost and httpsPorts; nil (and PrivateTraffic
	// false) states none of the data plane's settings, so a sandbox
	// created from a snapshot inherits its source's.
	Inbound *netpolicy.Inbound
	// IAM is the workload tokens Network's rules may name; nil with
	// Network nil too inherits a snapshot's.
	IAM      *netpolicy.IAM
	Metadata map[string]string
	EnvVars  map[string]string
	// CPUCount, MemoryMB and DiskSizeMB (the writable filesystem's size)
	// override the template's when > 0, within Config.Limits. A snapshot's
	// or user template's disk size and CPU count are its image's (shape.go).
	CPUCount   int
	MemoryMB   int
	DiskSizeMB int
	// VolumeMounts mount volumes (by name or id) at paths in the sandbox.
	// A snapshot's sandboxes mount its source's volumes: a request for
	// one may only repeat them.
	VolumeMounts []VolumeMountRequest
}

// VolumeMountRequest asks for volume Name at Path (E2B's
// SandboxVolumeMount).
type VolumeMountRequest struct {
	Name string
	Path string
}

// Create starts a new sandbox from a template and returns it running, its
// agent initialised. On failure nothing is left behind.
func (m *Manager) Create(ctx context.Context, req CreateRequest) (_ *Sandbox, err error) {
	defer func(start time.Time) { m.observe(OpCreate, start, err) }(m.now())
	if req.TemplateID == "" {
		return nil, fmt.Errorf("templateID is required: %w", errdefs.ErrInvalidArgument)
	}
	ttl, err := m.ttl(req.Timeout)
	if err != nil {
		return nil, err
	}
	if err := m.cfg.Limits.check(req); err != nil {
		return nil, err
	}
	tpl, err := m.st.GetTemplate(ctx, req.TemplateID)
	if err != nil {
		return nil, err
	}
	if err := m.admit(1); err != nil {
		return nil, err // before a pooled sandbox is taken
	}
	rec, shaped, release, err := m.createRecord(ctx, req, tpl, ttl)
	defer release()
	if err != nil {
		return nil, err
	}
	pooled := ""
	if poolable(req, tpl) {
		if pooled = m.takePooled(ctx, tpl); pooled != "" {
			rec.ID = pooled
		}
	}
	o, err := m.register(ctx, rec)
	release() // registered: a volume delete now sees the sandbox
	if err != nil {
		if pooled != "" {
			m.deletePooled(ctx, []string{pooled})
		}
		return nil, err
	}
	switch {
	case pooled != "":
		err = m.adoptPooled(ctx, o)
	case shaped:
		err = m.bootShaped(ctx, o, tpl)
	default:
		err = m.boot(ctx, o, tpl)
	}
	if err != nil {
		return nil, o.fail(ctx, err, StateKilled, recordError(err))
	}
	if err := o.done(ctx, StateRunning, func(e *entry) {
		// The TTL counts from when the sandbox is usable, not from the request.
		e.rec.StartedAt = m.now()
		e.rec.EndAt = e.rec.StartedAt.Add(ttl)
	}); err != nil {
		return nil, m.abandon(ctx, rec.ID, err)
	}
	m.log.Info("sandbox created", "sandbox", rec.ID, "template", tpl.ID)
	m.usedTemplate(ctx, tpl)
	return m.Get(ctx, rec.ID)
}

// createRecord is the record of a sandbox req creates from tpl, and
// whether it needs an image of its own shape (shape.go). release ends the
// hold on the volumes the record names (holdVolumes); call it once the
// sandbox is registered, or on failure (it may be called twice).
func (m *Manager) createRecord(ctx context.Context, req CreateRequest, tpl *store.Template, ttl time.Duration) (_ store.Sandbox, _ bool, release func(), _ error) {
	rec := m.newRecord(req, tpl, ttl)
	release = m.holdVolumes()
	shaped, err := shapeOf(rec, tpl)
	if err != nil {
		return rec, false, release, err
	}
	if rec.Volumes, err = m.resolveMounts(ctx, req.VolumeMounts, tpl); err != nil {
		return rec, false, release, err
	}
	return rec, shaped, release, m.recordNetwork(ctx, &rec, req, tpl)
}

// boot creates o's sandbox in the runtime — a restore of a template's
// image or of a snapshot, or a cold boot of a template without an image —
// and initialises its agent, pushing the removal of what it made on o's
// undo stack. The sandbox already holds what it runs on (register).
func (m *Manager) boot(ctx context.Context, o *op, tpl *store.Template) error {
	rec := o.e.rec
	if tpl.Kind == store.KindSnapshot {
		dir, unpin, err := m.openSnapshot(ctx, tpl.ID)
		if err != nil {
			return err
		}
		defer unpin()
		return m.restore(ctx, &o.undo, rec, dir, m.imageToken(ctx, tpl))
	}
	image, err := m.templateImage(ctx, tpl)
	if err != nil {
		return err
	}
	if image != "" {
		return m.restore(ctx, &o.undo, rec, image, "")
	}
	spec, err := m.spec(ctx, &rec)
	if err != nil {
		return err
	}
	if _, err := m.rt.Create(ctx, spec); err != nil {
		return fmt.Errorf("create sandbox %s: %w", spec.ID, err)
	}
	o.undo.Add("delete created sandbox", func(ctx context.Context) error { return m.rt.Delete(ctx, spec.ID) })
	return m.initAgent(ctx, &rec, "")
}

// bootShaped restores o's sandbox from the image of warmed template tpl
// with o's CPU count and disk size, made first if need be. The sandbox
// holds that image, and its record names it.
func (m *Manager) bootShaped(ctx context.Context, o *op, tpl *store.Template) error {
	ref, err := m.shapeImage(ctx, tpl, o.e.rec.CPUCount, o.e.rec.DiskSizeMB, sandboxHolder(o.id()))
	if err != nil {
		return err
	}
	m.mu.Lock()
	o.e.rec.Content = append(slices.Clone(o.e.rec.Content), ref)
	rec := o.e.rec
	m.mu.Unlock()
	dir, err := m.content.Open(ctx, ref)
	if err != nil {
		return err
	}
	return m.restore(ctx, &o.undo, rec, dir, "")
}

// adoptPooled initialises the agent of a sandbox taken from the pool; the
// sandbox's removal is pushed on o's undo stack.
func (m *Manager) adoptPooled(ctx context.Context, o *op) error {
	rec := o.e.rec
	o.undo.Add("delete pooled sandbox", func(ctx context.Context) error { return m.rt.Delete(ctx, rec.ID) })
	return m.initAgent(ctx, &rec, "")
}

// abandon kills a sandbox just made whose record could not be written: the
// caller hears the failure, and a sandbox nobody knows of must not run on.
func (m *Manager) abandon(ctx context.Context, id string, cause error) error {
	if err := m.Kill(context.WithoutCancel(ctx), id); err != nil && !errdefs.IsNotFound(err) {
		return errors.Join(cause, err)
	}
	return cause
}
