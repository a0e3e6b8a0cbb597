package sandbox

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/images"
	"github.com/forkbox/forkbox/internal/store"
)

// SnapshotOptions tune Snapshot.
type SnapshotOptions struct {
	// Name is an optional alias the snapshot can be created from.
	Name string
	// TTL, when > 0, lets the collector delete the snapshot once it is
	// unused and older than TTL.
	TTL time.Duration
	// Temporary snapshots (made for a clone) are removed automatically when
	// their last user is gone.
	Temporary bool
	// Origin records the operation that made it (OriginSnapshot when
	// empty, OriginClone).
	Origin Origin
}

// Snapshot captures a sandbox's whole state as a template that new sandboxes
// can start from. A running sandbox is frozen only while its memory is
// written and keeps running; a paused one stays paused (its pause image is
// shared, not copied).
func (m *Manager) Snapshot(ctx context.Context, id string, opts SnapshotOptions) (_ *Snapshot, err error) {
	defer func(start time.Time) { m.observe(OpSnapshot, start, err) }(m.now())
	tpl, _, err := m.snapshot(ctx, id, opts)
	if err != nil {
		return nil, err
	}
	return snapshotOf(tpl), nil
}

// snapshot is Snapshot, returning the snapshot's record and the source's
// record as it was captured.
func (m *Manager) snapshot(ctx context.Context, id string, opts SnapshotOptions) (*store.Template, store.Sandbox, error) {
	if _, err := m.checkpointer(); err != nil {
		return nil, store.Sandbox{}, err
	}
	if opts.Name != "" {
		if _, err := m.st.GetTemplate(ctx, opts.Name); err == nil {
			return nil, store.Sandbox{}, fmt.Errorf("name %q is taken: %w", opts.Name, errdefs.ErrAlreadyExists)
		}
	}
	o, err := m.claimWaiting(ctx, id, StateSnapshotting, StateRunning, StatePaused)
	if err != nil {
		return nil, store.Sandbox{}, err
	}
	ctx = context.WithoutCancel(ctx)
	snapID := newID()
	ref := images.Snapshot(snapID)
	o.undo.Add("remove snapshot image", func(ctx context.Context) error { return m.img.Remove(ctx, ref) })
	if err := m.captureImage(ctx, o, ref); err != nil {
		return nil, store.Sandbox{}, o.fail(ctx, fmt.Errorf("snapshot %s: %w", id, err), o.from, nil)
	}
	src := o.e.rec
	tpl, err := m.recordSnapshot(ctx, src, snapID, opts)
	if err != nil {
		return nil, store.Sandbox{}, o.fail(ctx, err, o.from, nil)
	}
	if err := o.done(ctx, o.from, nil); err != nil {
		return nil, store.Sandbox{}, err
	}
	m.log.Info("snapshot taken", "sandbox", id, "snapshot", snapID)
	return tpl, src, nil
}

// captureImage writes the state of a claimed sandbox as image ref: a live
// checkpoint when it was running, its pause image shared (images.Store.
// Link) when paused.
func (m *Manager) captureImage(ctx context.Context, o *op, ref images.Ref) error {
	if o.from != StatePaused {
		_, err := m.checkpointImage(ctx, o.id(), ref, true, nil)
		return err
	}
	return m.img.Link(ctx, images.Pause(o.id()), ref)
}

// recordSnapshot records snapshot snapID of src; its image is kept by id
// (images.Snapshot), its sandboxes run on src's Content.
func (m *Manager) recordSnapshot(ctx context.Context, src store.Sandbox, snapID string, o SnapshotOptions) (*store.Template, error) {
	origin := o.Origin
	if origin == "" {
		origin = OriginSnapshot
	}
	tpl := &store.Template{
		ID: snapID, Kind: store.KindSnapshot, RootFS: src.RootFS, Content: src.Content,
		CPUCount: src.CPUCount, MemoryMB: src.MemoryMB, DiskSizeMB: src.DiskSizeMB,
		SourceSandboxID: src.ID, ParentID: src.ID, Origin: string(origin),
		CreatedAt: m.now().UTC(), Temporary: o.Temporary,
		Network: src.Network, AllowInternet: &src.AllowInternet,
		Inbound: src.Inbound, PrivateTraffic: src.PrivateTraffic, IAM: src.IAM,
		Volumes: slices.Clone(src.Volumes),
	}
	if o.Name != "" {
		tpl.Aliases = []string{o.Name}
	}
	if o.TTL > 0 {
		tpl.ExpiresAt = tpl.CreatedAt.Add(o.TTL)
	}
	// The snapshot holds what its sandboxes will run on before it can be
	// found: the source may be killed the moment the claim ends.
	if err := m.hold(ctx, snapshotHolder(snapID), tpl.Content); err != nil {
		return nil, err
	}
	if err := m.st.PutTemplate(ctx, tpl); err != nil {
		m.release(ctx, snapshotHolder(snapID))
		return nil, err
	}
	return tpl, nil
}
