package sandbox

import (
	"context"
	"fmt"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/images"
	"github.com/forkbox/forkbox/internal/store"
)

// This file is the Manager's side of the content store (images.
// ContentStore): sandboxes and snapshots hold the layers and template
// images they run on, as recorded in their records' Content. A sandbox's
// references are taken before its record is first written (register) and
// dropped when it is killed (op.end); a snapshot's before its record is
// written and dropped with it. At start Recover sets them again from the
// records.

func sandboxHolder(id string) images.Holder { return images.Holder{Kind: images.HolderSandbox, ID: id} }
func snapshotHolder(id string) images.Holder {
	return images.Holder{Kind: images.HolderSnapshot, ID: id}
}

// rootfs is the root filesystem rec runs on: its layer in the content
// store, or a built-in template's directory.
func (m *Manager) rootfs(ctx context.Context, rec *store.Sandbox) (string, error) {
	layer, ok := images.Find(rec.Content, images.KindLayer)
	if !ok {
		return rec.RootFS, nil
	}
	dir, err := m.content.Open(ctx, layer)
	if err != nil {
		return "", fmt.Errorf("sandbox %s has lost its root filesystem: %w", rec.ID, err)
	}
	return dir, nil
}

// templateImage is the directory of tpl's image to restore from, "" when
// it has none (a cold boot).
func (m *Manager) templateImage(ctx context.Context, tpl *store.Template) (string, error) {
	img, ok := images.Find(tpl.Content, images.KindTemplateImage)
	if !ok {
		return "", nil
	}
	dir, err := m.content.Open(ctx, img)
	if err != nil {
		return "", fmt.Errorf("template %s has lost its image: %w", tpl.ID, err)
	}
	return dir, nil
}

// hold records that h holds refs; an entry gone is ErrNotFound.
func (m *Manager) hold(ctx context.Context, h images.Holder, refs []images.ContentRef) error {
	if len(refs) == 0 {
		return nil
	}
	if err := m.content.Hold(ctx, h, refs...); err != nil {
		return fmt.Errorf("%s cannot take its content: %w", h, err)
	}
	return nil
}

// release drops h's references: what nothing else holds goes at once.
func (m *Manager) release(ctx context.Context, h images.Holder) {
	if err := m.content.Release(context.WithoutCancel(ctx), h); err != nil {
		m.log.Error("release content", "holder", h.String(), "err", err)
	}
}

// setRecorded makes h hold what its record names, at start. An entry that
// is gone is logged and the rest held: the sandbox or snapshot is broken,
// the others on the same entries are not.
func (m *Manager) setRecorded(ctx context.Context, h images.Holder, refs []images.ContentRef) {
	var there []images.ContentRef
	for _, ref := range refs {
		if _, err := m.content.Open(ctx, ref); err == nil {
			there = append(there, ref)
		} else {
			m.log.Error("recorded content is gone", "holder", h.String(), "content", ref.String(), "err", err)
		}
	}
	if err := m.content.Set(ctx, h, there); err != nil && !errdefs.IsNotFound(err) {
		m.log.Error("hold recorded content", "holder", h.String(), "err", err)
	}
}

// holdSnapshots sets every snapshot's references from its record, at
// start (after the sweep of orphan images, so only kept ones hold).
func (m *Manager) holdSnapshots(ctx context.Context) {
	snaps, err := m.st.ListTemplates(ctx, store.KindSnapshot)
	if err != nil {
		m.log.Error("list snapshots to hold their content", "err", err)
		return
	}
	for _, t := range snaps {
		m.setRecorded(ctx, snapshotHolder(t.ID), t.Content)
	}
}
