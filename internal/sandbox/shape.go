package sandbox

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/images"
	"github.com/forkbox/forkbox/internal/store"
)

// A restore keeps what its image was made with: the writable filesystem's
// size and the CPU count the sandbox's kernel reports (gVisor saves both
// in the kernel's state, and runsc refuses a restore whose rootfs size
// differs). So a create asking for another disk size or CPU count than its
// template's image has needs an image made with them: for a template the
// daemon warmed itself (a booted agent, nothing started: store.Template's
// Warmed) that is one more warm boot at that shape, made once and kept in
// the content store beside the template's image, held by the template; a
// user template's image holds what its start command started and a
// snapshot's a sandbox's state, which no boot can make again, so their
// size is theirs.

// shapeOf reports whether rec, created from tpl, needs an image of its own
// shape rather than tpl's: ErrInvalidArgument when it does and none can be
// made. Fewer CPUs than the image has need none: the agent narrows what
// the sandbox's processes may use (and nproc) to them.
func shapeOf(rec store.Sandbox, tpl *store.Template) (bool, error) {
	disk := rec.DiskSizeMB != tpl.DiskSizeMB
	cpus := rec.CPUCount != tpl.CPUCount
	if !disk && !cpus {
		return false, nil
	}
	if _, image := images.Find(tpl.Content, images.KindTemplateImage); tpl.Kind == store.KindTemplate && !image {
		return false, nil // every create of it boots, with its own shape
	}
	if tpl.Warmed {
		return true, nil
	}
	what := "template " + tpl.ID + "'s image"
	if tpl.Kind == store.KindSnapshot {
		what = "snapshot " + tpl.ID
	}
	if disk {
		return false, fmt.Errorf("diskSizeMB %d: the disk size of sandboxes of %s is %d MiB (a restore keeps its image's): %w",
			rec.DiskSizeMB, what, tpl.DiskSizeMB, errdefs.ErrInvalidArgument)
	}
	if rec.CPUCount > tpl.CPUCount {
		return false, fmt.Errorf("cpuCount %d: sandboxes of %s have at most %d CPUs (a restore keeps its image's): %w",
			rec.CPUCount, what, tpl.CPUCount, errdefs.ErrInvalidArgument)
	}
	return false, nil
}

// maxShapeImages bounds the images of other shapes a template holds: each
// is a whole checkpoint (11 MiB for base), and a client may ask for any
// size. Beyond it the one created from least recently is let go (and
// leaves the disk with the last sandbox restored from it).
const maxShapeImages = 8

// shapeRef names the image of base made with cpus CPUs and a disk of
// diskMB: base's key followed by the shape, so an image's shapes are found
// by its key (and go with it when it is rebuilt).
func shapeRef(base images.ContentRef, cpus, diskMB int) images.ContentRef {
	return images.TemplateImage(fmt.Sprintf("%s%04x%08x", base.Key, cpus, diskMB))
}

// isShapeOf reports whether ref is an image of another shape of base.
func isShapeOf(ref, base images.ContentRef) bool {
	return ref.Kind == base.Kind && len(ref.Key) == len(base.Key)+12 && strings.HasPrefix(ref.Key, base.Key)
}

// shapeImage returns the image of warmed template tpl made with cpus CPUs
// and a disk of diskMB, held by h: it boots and checkpoints one the first
// time it is asked for (concurrent asks share that boot).
func (m *Manager) shapeImage(ctx context.Context, tpl *store.Template, cpus, diskMB int, h images.Holder) (images.ContentRef, error) {
	base, ok := images.Find(tpl.Content, images.KindTemplateImage)
	if !ok {
		return images.ContentRef{}, fmt.Errorf("template %s has no image: %w", tpl.ID, errdefs.ErrNotFound)
	}
	ref := shapeRef(base, cpus, diskMB)
	err := m.content.Hold(ctx, h, ref)
	if errdefs.IsNotFound(err) {
		_, err, _ = m.shapes.Do(ref.Key, func() (any, error) {
			// A boot that finished between this caller's miss and its
			// turn here made the image already (Do only shares a boot in
			// flight): holding it is all there is to do.
			if err := m.content.Hold(ctx, h, ref); !errdefs.IsNotFound(err) {
				return nil, err
			}
			shaped := *tpl
			shaped.CPUCount, shaped.DiskSizeMB = cpus, diskMB
			// Not cut short by the request: the image serves every later one.
			return nil, m.warmImage(context.WithoutCancel(ctx), &shaped, ref, builtinHolder(tpl.ID))
		})
		if err == nil {
			err = m.content.Hold(ctx, h, ref)
		}
	}
	if err != nil {
		return images.ContentRef{}, fmt.Errorf("image of template %s with %d CPUs and %d MiB of disk: %w", tpl.ID, cpus, diskMB, err)
	}
	m.usedShape(ctx, tpl.ID, base, ref)
	return ref, nil
}

// shapeUses records when each template's images of other shapes were last
// created from; guarded by Manager.shapesMu.
type shapeUses map[string]map[images.ContentRef]time.Time

// usedShape notes a create from shaped image ref of template tplID (made
// from base) and lets go of the least recently used beyond
// maxShapeImages.
func (m *Manager) usedShape(ctx context.Context, tplID string, base, ref images.ContentRef) {
	m.shapesMu.Lock()
	defer m.shapesMu.Unlock()
	if m.shapeUse[tplID] == nil {
		m.shapeUse[tplID] = map[images.ContentRef]time.Time{}
	}
	m.shapeUse[tplID][ref] = m.now()
	m.setShapesLocked(ctx, tplID, base)
}

// holdShapes makes built-in template tplID hold image base and, of its
// images of other shapes on disk, the maxShapeImages most recently used
// (made, after a restart): WarmTemplate at start.
func (m *Manager) holdShapes(ctx context.Context, tplID string, base images.ContentRef) error {
	all, err := m.content.List(ctx, images.KindTemplateImage)
	if err != nil {
		return err
	}
	m.shapesMu.Lock()
	defer m.shapesMu.Unlock()
	uses := map[images.ContentRef]time.Time{}
	for _, ref := range all {
		if !isShapeOf(ref, base) {
			continue
		}
		if dir, err := m.content.Open(ctx, ref); err == nil {
			if fi, err := os.Stat(dir); err == nil {
				uses[ref] = fi.ModTime()
			}
		}
	}
	m.shapeUse[tplID] = uses
	return m.setShapesLocked(ctx, tplID, base)
}

// setShapesLocked makes template tplID hold base and its maxShapeImages
// most recently used shapes, and forgets the others. m.shapesMu held.
func (m *Manager) setShapesLocked(ctx context.Context, tplID string, base images.ContentRef) error {
	uses := m.shapeUse[tplID]
	shapes := make([]images.ContentRef, 0, len(uses))
	for ref := range uses {
		shapes = append(shapes, ref)
	}
	slices.SortFunc(shapes, func(a, b images.ContentRef) int { return uses[b].Compare(uses[a]) })
	for _, ref := range shapes[min(len(shapes), maxShapeImages):] {
		m.log.Info("letting go of the least recently used image of another shape", "template", tplID, "image", ref.String())
		delete(uses, ref)
	}
	keep := append([]images.ContentRef{base}, shapes[:min(len(shapes), maxShapeImages)]...)
	err := m.content.Set(ctx, builtinHolder(tplID), keep)
	if err != nil {
		m.log.Error("hold template images", "template", tplID, "err", err)
	}
	return err
}
