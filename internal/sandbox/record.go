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

// newID returns a fresh sandbox or snapshot id.
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

// newRecord builds the record of a sandbox created from tpl (a template or
// a snapshot).
func (m *Manager) newRecord(req CreateRequest, tpl *store.Template, ttl time.Duration) store.Sandbox {
	now := m.now()
	rec := store.Sandbox{
		ID: newID(), TemplateID: tpl.ID, ClientID: m.cfg.ClientID,
		Metadata: cloneMap(req.Metadata), EnvVars: cloneMap(req.EnvVars),
		CPUCount: tpl.CPUCount, MemoryMB: tpl.MemoryMB, DiskSizeMB: tpl.DiskSizeMB,
		EnvdVersion: m.cfg.EnvdVersion, AutoPause: req.AutoPause, AutoResume: req.AutoResume,
		AutoPauseFilesOnly: req.AutoPauseFilesOnly,
		Secure:             req.Secure || req.PrivateTraffic, PrivateTraffic: req.PrivateTraffic,
		AllowInternet: req.AllowInternet == nil || *req.AllowInternet,
		StartedAt:     now, EndAt: now.Add(ttl), Origin: string(OriginCreate), RuntimeName: m.rt.Name(),
		RootFS: tpl.RootFS, Content: tpl.Content, AgentArgs: tpl.AgentArgs,
	}
	if len(tpl.Aliases) > 0 {
		rec.Alias = tpl.Aliases[0]
	}
	if tpl.Kind == store.KindSnapshot {
		rec.ParentID, rec.Origin = tpl.ID, string(OriginRestore)
	}
	if req.CPUCount > 0 {
		rec.CPUCount = req.CPUCount
	}
	if req.MemoryMB > 0 {
		rec.MemoryMB = req.MemoryMB
	}
	if req.DiskSizeMB > 0 {
		rec.DiskSizeMB = req.DiskSizeMB
	}
	if req.Secure {
		rec.EnvdAccessToken, rec.TrafficAccessToken = newToken(), newToken()
	}
	return rec
}

// copyRecord derives a clone's record from its source.
func (m *Manager) copyRecord(src store.Sandbox, snap *store.Template, ttl time.Duration) store.Sandbox {
	now := m.now()
	rec := src
	rec.ID = newID()
	rec.ClientID = m.cfg.ClientID // the source may run on another node
	rec.TemplateID = snap.ID
	rec.Metadata, rec.EnvVars = cloneMap(src.Metadata), cloneMap(src.EnvVars)
	rec.AutoPause = false
	rec.StartedAt, rec.EndAt = now, now.Add(ttl)
	rec.ParentID, rec.Origin = snap.ID, string(OriginClone)
	rec.ImageDir, rec.Error, rec.Rollbacks = "", "", nil
	if rec.Secure {
		rec.EnvdAccessToken, rec.TrafficAccessToken = newToken(), newToken()
	}
	return rec
}

// spec builds the runtime spec for a sandbox record, its root filesystem
// opened through the content store when it is a layer.
func (m *Manager) spec(ctx context.Context, rec *store.Sandbox) (runtime.Spec, error) {
	args := m.cfg.AgentArgs
	if len(rec.AgentArgs) > 0 {
		args = rec.AgentArgs
	}
	rootfs, err := m.rootfs(ctx, rec)
	if err != nil {
		return runtime.Spec{}, err
	}
	vols, err := m.volumeDirs(ctx, rec.Volumes)
	if err != nil {
		return runtime.Spec{}, err
	}
	return runtime.Spec{
		ID: rec.ID, RootFS: rootfs, Args: args,
		Hostname: "forkbox",
		Env:      []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
		Resources: runtime.Resources{
			CPUCount: rec.CPUCount, MemoryMB: rec.MemoryMB, DiskMB: rec.DiskSizeMB,
		},
		AllowInternet: rec.AllowInternet,
		Egress:        m.egress(rec),
		Volumes:       vols,
	}, nil
}

func cloneMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
