package sandbox

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/runtime"
	"github.com/forkbox/forkbox/internal/store"
)

// Recover rebuilds the manager's view after a (re)start: sandboxes the
// store knows and the runtime still runs are reattached; those whose runtime
// side is gone are marked killed and whatever they left is released; runtime
// sandboxes the store does not know (a crash between runtime create and the
// first write) are deleted. Call it once, before serving.
func (m *Manager) Recover(ctx context.Context) error {
	infos, err := m.rt.List(ctx)
	if err != nil {
		return fmt.Errorf("list runtime sandboxes: %w", err)
	}
	live := make(map[string]runtime.Info, len(infos))
	for _, in := range infos {
		live[in.ID] = in
	}
	recs, _, err := m.st.ListSandboxes(ctx, store.SandboxFilter{States: liveStates()})
	if err != nil {
		return fmt.Errorf("list stored sandboxes: %w", err)
	}
	known := make(map[string]bool, len(recs))
	for _, rec := range recs {
		known[rec.ID] = true
		m.recoverOne(ctx, rec, live[rec.ID])
	}
	m.removeOrphanImages(ctx)
	for id := range live {
		if !known[id] {
			m.log.Warn("removing orphan runtime sandbox", "sandbox", id)
			if err := m.rt.Delete(ctx, id); err != nil && !errdefs.IsNotFound(err) {
				m.log.Error("remove orphan", "sandbox", id, "err", err)
			}
		}
	}
	return nil
}

// recoverOne settles one stored sandbox against the runtime's view (in has
// an empty ID when the runtime does not have the sandbox).
func (m *Manager) recoverOne(ctx context.Context, rec *store.Sandbox, in runtime.Info) {
	st := State(rec.State)
	e := &entry{rec: *rec, state: st}
	running := in.ID != "" && (in.State == runtime.StateRunning || in.State == runtime.StatePaused)
	if e.rec.ImageDir == "" && imageExists(m.pauseDir(rec.ID)) {
		// The daemon died after a pause's checkpoint but before recording it.
		e.rec.ImageDir = m.pauseDir(rec.ID)
	}
	hasImage := imageExists(e.rec.ImageDir)
	switch {
	case st == StateCreating || st == StateKilling:
		// A half-made sandbox (its agent may hold another's token) or one
		// that was being killed: finish it off.
		m.bury(ctx, e, in.ID != "")
	case running && st != StatePaused:
		// Whatever was under way (a pause, snapshot, resume) did not finish
		// or finished without being recorded: the sandbox still runs.
		if in.State == runtime.StatePaused {
			m.thaw(ctx, rec.ID)
		}
		if e.rec.ImageDir != "" {
			removeAll(e.rec.ImageDir)
			e.rec.ImageDir = ""
		}
		m.adopt(e, StateRunning)
		m.log.Info("reattached sandbox", "sandbox", rec.ID, "was", st)
	case !running && hasImage:
		if in.ID != "" {
			m.rt.Delete(ctx, rec.ID)
		}
		m.adopt(e, StatePaused)
		m.log.Info("recovered paused sandbox", "sandbox", rec.ID, "was", st)
	default:
		m.bury(ctx, e, in.ID != "")
	}
}

// bury records a sandbox that did not survive the daemon's absence as
// killed and releases whatever it left on the host.
func (m *Manager) bury(ctx context.Context, e *entry, inRuntime bool) {
	id := e.rec.ID
	m.log.Warn("sandbox lost while the daemon was down", "sandbox", id, "state", e.state)
	if err := m.rt.Delete(ctx, id); err != nil && !errdefs.IsNotFound(err) {
		m.log.Error("release dead sandbox", "sandbox", id, "err", err, "inRuntime", inRuntime)
	}
	if e.rec.ImageDir != "" {
		removeAll(e.rec.ImageDir)
		e.rec.ImageDir = ""
	}
	e.rec.Error = "lost while the daemon was down"
	m.mu.Lock()
	defer m.mu.Unlock()
	e.state = StateKilled
	m.persistLocked(ctx, e)
}

func (m *Manager) thaw(ctx context.Context, id string) {
	if err := m.rt.Thaw(ctx, id); err != nil {
		m.log.Error("thaw after restart", "sandbox", id, "err", err)
	}
}

// imageExists reports whether dir holds a written checkpoint image.
func imageExists(dir string) bool {
	if dir == "" {
		return false
	}
	ents, err := os.ReadDir(dir)
	return err == nil && len(ents) > 0
}

// adopt puts a recovered entry in the live map.
func (m *Manager) adopt(e *entry, st State) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e.state = st
	m.persistLocked(context.Background(), e)
	m.boxes[e.rec.ID] = e
}

// removeOrphanImages deletes image directories no record points to: the
// remains of a snapshot or pause the daemon died in the middle of.
func (m *Manager) removeOrphanImages(ctx context.Context) {
	if m.cfg.ImageDir == "" {
		return
	}
	snapDir := filepath.Join(m.cfg.ImageDir, "snapshots")
	ents, _ := os.ReadDir(snapDir)
	for _, ent := range ents {
		if _, err := m.st.GetTemplate(ctx, ent.Name()); errdefs.IsNotFound(err) {
			m.log.Warn("removing orphan snapshot image", "image", ent.Name())
			removeAll(filepath.Join(snapDir, ent.Name()))
		}
	}
	pauseDir := filepath.Join(m.cfg.ImageDir, "paused")
	ents, _ = os.ReadDir(pauseDir)
	for _, ent := range ents {
		m.mu.Lock()
		e, ok := m.boxes[ent.Name()]
		keep := ok && e.state == StatePaused && e.rec.ImageDir == filepath.Join(pauseDir, ent.Name())
		m.mu.Unlock()
		if !keep {
			m.log.Warn("removing orphan pause image", "sandbox", ent.Name())
			removeAll(filepath.Join(pauseDir, ent.Name()))
		}
	}
}
