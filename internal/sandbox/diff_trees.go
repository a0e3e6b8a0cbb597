package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/fsdiff"
	"github.com/forkbox/forkbox/internal/runtime"
	"github.com/forkbox/forkbox/internal/store"
)

// upperLayerFile is the file list every image the Manager writes keeps
// beside the runtime's own files: the sandbox's upper layer as a tar
// (runtime.UpperLayerWriter), so a diff of a snapshot or a paused sandbox
// reads it instead of restoring the image.
const upperLayerFile = "forkbox-upper.tar"

// openedTree is a tree to diff and what to release after.
type openedTree struct {
	fsdiff.Tree
	close func()
}

func (t *openedTree) Close() {
	if t != nil && t.close != nil {
		t.close()
	}
}

// openTree opens the files of sandbox, snapshot or template id.
func (m *Manager) openTree(ctx context.Context, id string) (*openedTree, error) {
	if rec, err := m.st.GetSandbox(ctx, id); err == nil {
		return m.openSandboxTree(ctx, rec)
	}
	tpl, err := m.st.GetTemplate(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("%q is no sandbox, snapshot or template: %w", id, errdefs.ErrNotFound)
	}
	lower, err := m.lowerOf(ctx, &store.Sandbox{ID: tpl.ID, RootFS: tpl.RootFS, Content: tpl.Content})
	if err != nil {
		return nil, err
	}
	if tpl.Kind != store.KindSnapshot {
		return &openedTree{Tree: fsdiff.Tree{Upper: fsdiff.EmptyLayer(), Lower: lower}}, nil
	}
	dir, unpin, err := m.openSnapshot(ctx, tpl.ID)
	if err != nil {
		return nil, err
	}
	layer, release, err := m.layers.get(tpl.ID, func() (*fsdiff.Layer, error) {
		return openImageLayer(dir, "snapshot "+tpl.ID)
	})
	if err != nil {
		unpin()
		return nil, err
	}
	return &openedTree{Tree: fsdiff.Tree{Upper: layer, Lower: lower}, close: func() { release(); unpin() }}, nil
}

// openSandboxTree opens a live sandbox's files: a running one's upper
// layer written now, a paused one's from its image.
func (m *Manager) openSandboxTree(ctx context.Context, rec *store.Sandbox) (*openedTree, error) {
	state, imageDir, rec, err := m.settledState(ctx, rec.ID)
	if err != nil {
		return nil, err
	}
	lower, err := m.lowerOf(ctx, rec)
	if err != nil {
		return nil, err
	}
	var layer *fsdiff.Layer
	switch state {
	case StateRunning:
		layer, err = m.liveLayer(ctx, rec.ID)
	case StatePaused:
		layer, err = openImageLayer(imageDir, "paused sandbox "+rec.ID)
	default:
		err = fmt.Errorf("sandbox %s is %s: try again when it is done: %w", rec.ID, state, errdefs.ErrConflict)
	}
	if err != nil {
		return nil, err
	}
	return &openedTree{Tree: fsdiff.Tree{Upper: layer, Lower: lower}, close: func() { layer.Close() }}, nil
}

// settledState waits out an operation in progress on sandbox id (a
// pause, a snapshot) and returns its state, pause image and record.
func (m *Manager) settledState(ctx context.Context, id string) (State, string, *store.Sandbox, error) {
	for {
		m.mu.Lock()
		e, ok := m.boxes[id]
		var state State
		var imageDir string
		var rec store.Sandbox
		if ok {
			state, imageDir, rec = e.state, e.rec.ImageDir, e.rec
		}
		m.mu.Unlock()
		if !ok {
			return "", "", nil, fmt.Errorf("sandbox %s is killed: its files are gone: %w", id, errdefs.ErrNotFound)
		}
		if !slices.Contains(busy, state) {
			return state, imageDir, &rec, nil
		}
		if err := m.waitIdle(ctx, id); err != nil {
			return "", "", nil, err
		}
	}
}

func (m *Manager) lowerOf(ctx context.Context, rec *store.Sandbox) (*fsdiff.Lower, error) {
	dir, err := m.rootfs(ctx, rec)
	if err != nil {
		return nil, err
	}
	return fsdiff.NewLower(dir)
}

// openImageLayer reads the file list an image keeps.
func openImageLayer(dir, what string) (*fsdiff.Layer, error) {
	l, err := openLayer(filepath.Join(dir, upperLayerFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s was saved without a file list (before diffs existed): %w", what, errdefs.ErrConflict)
	}
	return l, err
}

// openLayer is fsdiff.OpenLayer with a layer too large to hold refused
// as too much to ask (429), not as the daemon's failure.
func openLayer(file string) (*fsdiff.Layer, error) {
	l, err := fsdiff.OpenLayer(file)
	if errors.Is(err, fsdiff.ErrTooLarge) {
		return nil, fmt.Errorf("%w: %w", err, errdefs.ErrResourceExhausted)
	}
	return l, err
}

func (m *Manager) upperWriter() (runtime.UpperLayerWriter, error) {
	w, ok := m.rt.(runtime.UpperLayerWriter)
	if !ok {
		return nil, fmt.Errorf("runtime %s cannot list a sandbox's files: %w", m.rt.Name(), errdefs.ErrUnavailable)
	}
	return w, nil
}

// liveLayer writes running sandbox id's upper layer to a temporary file
// and opens it; the file is unlinked at once (the open layer keeps it).
func (m *Manager) liveLayer(ctx context.Context, id string) (*fsdiff.Layer, error) {
	file, drop, err := m.tempUpperLayer(ctx, id)
	if err != nil {
		return nil, err
	}
	defer drop()
	return openLayer(file)
}

// tempUpperLayer writes id's upper layer into a new temporary file.
func (m *Manager) tempUpperLayer(ctx context.Context, id string) (string, func(), error) {
	w, err := m.upperWriter()
	if err != nil {
		return "", nil, err
	}
	tmp, err := os.MkdirTemp("", "forkbox-upper-")
	if err != nil {
		return "", nil, err
	}
	drop := func() { os.RemoveAll(tmp) }
	file := filepath.Join(tmp, upperLayerFile)
	start := m.now()
	if err := w.WriteUpperLayer(ctx, id, file); err != nil {
		drop()
		return "", nil, fmt.Errorf("list the files of %s: %w", id, err)
	}
	m.log.Debug("upper layer written", "sandbox", id, "took", m.now().Sub(start))
	return file, drop, nil
}

// keepUpperLayer moves a temporary upper layer into image directory dir.
func keepUpperLayer(file, dir string) error {
	dst := filepath.Join(dir, upperLayerFile)
	if err := os.Rename(file, dst); err == nil {
		return nil
	}
	src, err := os.Open(file)
	if err != nil {
		return err
	}
	defer src.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, src); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
