package sandbox

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/store"
)

// A restore keeps what its image was made with: the writable filesystem's
// size and the CPU count the sandbox's kernel reports (gVisor saves both
// in the kernel's state, and runsc refuses a restore whose rootfs size
// differs). So a create asking for another disk size or CPU count than its
// template's image has needs an image made with them: for a template the
// daemon warmed itself (a booted agent, nothing started: store.Template's
// Warmed) that is one more warm boot at that shape, made once and kept
// beside the template's image; a user template's image holds what its
// start command started and a snapshot's a sandbox's state, which no boot
// can make again, so their size is theirs.

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
	if tpl.Kind == store.KindTemplate && tpl.ImageDir == "" {
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

// maxShapeImages bounds the images of other shapes kept per template: each
// is a whole checkpoint (11 MiB for base), and a client may ask for any
// size. Beyond it the one created from least recently goes.
const maxShapeImages = 8

// shapeImage returns the image of warmed template tpl made with cpus CPUs
// and a disk of diskMB, booting and checkpointing one the first time it is
// asked for (concurrent asks share that boot). The caller restores from it
// holding m.shapesMu for reading, so pruning never removes it under them.
func (m *Manager) shapeImage(ctx context.Context, tpl *store.Template, cpus, diskMB int) (string, error) {
	dir := fmt.Sprintf("%s-c%d-d%d", tpl.ImageDir, cpus, diskMB)
	if imageExists(dir) {
		now := m.now()
		os.Chtimes(dir, now, now) // recency, for pruneShapes
		return dir, nil
	}
	_, err, _ := m.shapes.Do(dir, func() (any, error) {
		shaped := *tpl
		shaped.CPUCount, shaped.DiskSizeMB = cpus, diskMB
		// Not cut short by the request: the image serves every later one.
		if err := m.WarmTemplate(context.WithoutCancel(ctx), &shaped, dir); err != nil {
			return nil, err
		}
		m.pruneShapes(tpl.ImageDir, dir)
		return nil, nil
	})
	if err != nil {
		return "", fmt.Errorf("image of template %s with %d CPUs and %d MiB of disk: %w", tpl.ID, cpus, diskMB, err)
	}
	return dir, nil
}

// pruneShapes removes the least recently used shaped images of the
// template image base beyond maxShapeImages, never keep.
func (m *Manager) pruneShapes(base, keep string) {
	m.shapesMu.Lock()
	defer m.shapesMu.Unlock()
	ents, _ := os.ReadDir(filepath.Dir(base))
	type shaped struct {
		path string
		used time.Time
	}
	var all []shaped
	for _, e := range ents {
		p := filepath.Join(filepath.Dir(base), e.Name())
		fi, err := e.Info()
		if err != nil || !strings.HasPrefix(p, base+"-c") || strings.Contains(e.Name(), scratchInfix) || p == keep {
			continue
		}
		all = append(all, shaped{p, fi.ModTime()})
	}
	slices.SortFunc(all, func(a, b shaped) int { return b.used.Compare(a.used) })
	for _, s := range all[min(len(all), maxShapeImages-1):] {
		m.log.Info("removing the least recently used image of another shape", "image", s.path)
		os.RemoveAll(s.path)
	}
}
