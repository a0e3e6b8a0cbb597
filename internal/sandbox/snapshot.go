package sandbox

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/forkbox/forkbox/internal/errdefs"
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

func (m *Manager) snapshotDir(id string) string {
	return filepath.Join(m.cfg.ImageDir, "snapshots", id)
}

// Snapshot captures a sandbox's whole state as a template that new sandboxes
// can start from. A running sandbox is frozen only while its memory is
// written and keeps running; a paused one stays paused (its pause image is
// shared, not copied).
func (m *Manager) Snapshot(ctx context.Context, id string, opts SnapshotOptions) (*Snapshot, error) {
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
	dir := m.snapshotDir(snapID)
	o.undo.Add("remove snapshot image", func(context.Context) error { return os.RemoveAll(dir) })
	if err := m.captureImage(ctx, o, dir); err != nil {
		return nil, store.Sandbox{}, o.fail(ctx, fmt.Errorf("snapshot %s: %w", id, err), o.from, nil)
	}
	src := o.e.rec
	tpl, err := m.recordSnapshot(ctx, src, snapID, dir, opts)
	if err != nil {
		return nil, store.Sandbox{}, o.fail(ctx, err, o.from, nil)
	}
	if err := o.done(ctx, o.from, nil); err != nil {
		return nil, store.Sandbox{}, err
	}
	m.log.Info("snapshot taken", "sandbox", id, "snapshot", snapID)
	return tpl, src, nil
}

// captureImage writes the state of a claimed sandbox into dir: a live
// checkpoint when it was running, hard links to its pause image when paused.
func (m *Manager) captureImage(ctx context.Context, o *op, dir string) error {
	if o.from == StatePaused {
		return linkTree(o.e.rec.ImageDir, dir)
	}
	return m.checkpointTo(ctx, o.id(), dir, true)
}

func (m *Manager) recordSnapshot(ctx context.Context, src store.Sandbox, snapID, dir string, o SnapshotOptions) (*store.Template, error) {
	origin := o.Origin
	if origin == "" {
		origin = OriginSnapshot
	}
	tpl := &store.Template{
		ID: snapID, Kind: store.KindSnapshot, RootFS: src.RootFS,
		CPUCount: src.CPUCount, MemoryMB: src.MemoryMB, DiskSizeMB: src.DiskSizeMB,
		ImageDir: dir, SourceSandboxID: src.ID, ParentID: src.ID, Origin: string(origin),
		CreatedAt: m.now().UTC(), Temporary: o.Temporary,
	}
	if o.Name != "" {
		tpl.Aliases = []string{o.Name}
	}
	if o.TTL > 0 {
		tpl.ExpiresAt = tpl.CreatedAt.Add(o.TTL)
	}
	if err := m.st.PutTemplate(ctx, tpl); err != nil {
		return nil, err
	}
	return tpl, nil
}

// removeAll removes a directory tree; a failure only leaks disk space,
// which is logged by the collector's next pass, so it is ignored here.
func removeAll(dir string) { os.RemoveAll(dir) }

// linkTree recreates src's files in dst as hard links: images are never
// modified after they are written, so sharing their blocks is safe and free.
func linkTree(src, dst string) error {
	if src == "" {
		return fmt.Errorf("paused sandbox has no image: %w", errdefs.ErrInternal)
	}
	return filepath.Walk(src, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if info.IsDir() {
			return os.MkdirAll(target, 0o700)
		}
		return os.Link(p, target)
	})
}
