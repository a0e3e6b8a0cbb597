package sandbox

import (
	"context"
	"errors"
	"fmt"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/images"
	"github.com/forkbox/forkbox/internal/runtime"
	"github.com/forkbox/forkbox/internal/store"
)

// Recover rebuilds the manager's view after a (re)start: sandboxes the
// store knows and the runtime still runs are reattached; those whose runtime
// side is gone are marked killed and whatever they left is released; runtime
// sandboxes the store does not know (a crash between runtime create and the
// first write) are deleted. Call it once, before serving. Records it could
// not write back are its error (the view in memory is settled regardless).
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
	var errs []error
	for _, rec := range recs {
		if !m.owns(rec.ClientID) {
			continue // another daemon's, of the same database: it recovers its own
		}
		known[rec.ID] = true
		errs = append(errs, m.recoverOne(ctx, rec, live[rec.ID]))
	}
	for _, ref := range images.DropStaged(m.img) {
		m.log.Warn("removed an image a stopped daemon left unfinished", "image", ref.String())
	}
	m.removeOrphanImages(ctx)
	m.holdSnapshots(ctx)
	for id := range live {
		if !known[id] {
			m.log.Warn("removing orphan runtime sandbox", "sandbox", id)
			if err := m.rt.Delete(ctx, id); err != nil && !errdefs.IsNotFound(err) {
				m.log.Error("remove orphan", "sandbox", id, "err", err)
			}
		}
	}
	m.collectEventLogs(ctx)
	if m.collectContent {
		if _, err := m.content.Collect(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// recoverOne settles one stored sandbox against the runtime's view (in has
// an empty ID when the runtime does not have the sandbox).
func (m *Manager) recoverOne(ctx context.Context, rec *store.Sandbox, in runtime.Info) error {
	st := State(rec.State)
	e := &entry{rec: *rec, state: st}
	running := in.ID != "" && (in.State == runtime.StateRunning || in.State == runtime.StatePaused)
	// A pause image may be there unrecorded: the daemon died after a
	// pause's checkpoint but before recording it.
	// Only an unrecorded one is opened: with an object store, Open would
	// download every paused sandbox's image at start.
	hasImage := images.Exists(ctx, m.img, images.Pause(rec.ID))
	if hasImage && e.rec.ImageDir == "" {
		if pauseDir, err := m.img.Open(ctx, images.Pause(rec.ID)); err == nil {
			e.rec.ImageDir = pauseDir
		}
	}
	switch {
	case st == StateCreating || st == StateKilling:
		// A half-made sandbox (its agent may hold another's token) or one
		// that was being killed: finish it off.
		return m.bury(ctx, e, in.ID != "")
	case running && st != StatePaused:
		// Whatever was under way (a pause, snapshot, resume) did not finish
		// or finished without being recorded: the sandbox still runs.
		if in.State == runtime.StatePaused {
			m.thaw(ctx, rec.ID)
		}
		m.dropPauseImage(ctx, e)
		m.log.Info("reattached sandbox", "sandbox", rec.ID, "was", st)
		return m.adopt(e, StateRunning)
	case !running && (hasImage || (st == StatePausing && m.commitStaged(ctx, e))):
		if in.ID != "" {
			m.rt.Delete(ctx, rec.ID)
		}
		m.log.Info("recovered paused sandbox", "sandbox", rec.ID, "was", st)
		return m.adopt(e, StatePaused)
	default:
		return m.bury(ctx, e, in.ID != "")
	}
}

// commitStaged commits the pause image of e that a daemon killed during
// its upload left staged (images.Staged) and reports whether e is paused
// with it now. The checkpoint had stopped the sandbox (the runtime no
// longer runs it), which runsc does only once the image is written.
func (m *Manager) commitStaged(ctx context.Context, e *entry) bool {
	ref := images.Pause(e.rec.ID)
	if _, ok := images.Staged(m.img, ref); !ok {
		return false
	}
	if err := m.img.Commit(ctx, ref); err != nil {
		m.log.Error("commit the pause image a killed daemon left", "sandbox", e.rec.ID, "err", err)
		return false
	}
	dir, err := m.img.Open(ctx, ref)
	if err != nil {
		m.log.Error("open the pause image a killed daemon left", "sandbox", e.rec.ID, "err", err)
		return false
	}
	e.rec.ImageDir = dir
	m.log.Warn("a pause cut short by the daemon's death is finished: its image is kept", "sandbox", e.rec.ID)
	return true
}

// bury records a sandbox that did not survive the daemon's absence as
// killed and releases whatever it left on the host.
func (m *Manager) bury(ctx context.Context, e *entry, inRuntime bool) error {
	id := e.rec.ID
	m.log.Warn("sandbox lost while the daemon was down", "sandbox", id, "state", e.state)
	if err := m.rt.Delete(ctx, id); err != nil && !errdefs.IsNotFound(err) {
		m.log.Error("release dead sandbox", "sandbox", id, "err", err, "inRuntime", inRuntime)
	}
	m.dropPauseImage(ctx, e)
	e.rec.Error = "lost while the daemon was down"
	m.mu.Lock()
	defer m.mu.Unlock()
	e.state = StateKilled
	return m.persistLocked(ctx, e)
}

func (m *Manager) thaw(ctx context.Context, id string) {
	if err := m.rt.Thaw(ctx, id); err != nil {
		m.log.Error("thaw after restart", "sandbox", id, "err", err)
	}
}

// dropPauseImage removes a recovered sandbox's pause image, if any.
func (m *Manager) dropPauseImage(ctx context.Context, e *entry) {
	if err := m.img.Remove(ctx, images.Pause(e.rec.ID)); err != nil {
		m.log.Error("remove pause image", "sandbox", e.rec.ID, "err", err)
	}
	e.rec.ImageDir = ""
}

// adopt puts a recovered entry in the live map and records its state.
func (m *Manager) adopt(e *entry, st State) error {
	m.setRecorded(context.Background(), sandboxHolder(e.rec.ID), e.rec.Content)
	m.mu.Lock()
	defer m.mu.Unlock()
	e.state = st
	m.boxes[e.rec.ID] = e
	if st == StateRunning {
		m.watchExitLocked(e.rec.ID)
	}
	return m.persistLocked(context.Background(), e)
}

// removeOrphanImages deletes the images no record refers to: the remains
// of a snapshot or pause the daemon died in the middle of. A snapshot image
// is kept while its snapshot's record exists, a pause image while its
// sandbox is paused. With images shared between nodes, a pause image of
// another node's live sandbox stays, and so does an image younger than
// orphanImageGrace that no record names yet (another node's commit).
func (m *Manager) removeOrphanImages(ctx context.Context) {
	removed, err := images.Sweep(ctx, m.img, func(ref images.Ref) bool {
		switch ref.Kind {
		case images.KindSnapshot:
			_, err := m.st.GetTemplate(ctx, ref.ID)
			return !errdefs.IsNotFound(err) || m.young(ctx, ref)
		case images.KindPause:
			return m.keepPauseImage(ctx, ref)
		}
		return true
	})
	for _, ref := range removed {
		m.log.Warn("removed orphan image", "image", ref.String())
	}
	if err != nil {
		m.log.Error("remove orphan images", "err", err)
	}
}

// keepPauseImage is removeOrphanImages' verdict on a pause image.
func (m *Manager) keepPauseImage(ctx context.Context, ref images.Ref) bool {
	m.mu.Lock()
	e, ok := m.boxes[ref.ID]
	m.mu.Unlock()
	if ok || !m.cfg.SharedImages {
		return ok && e.state == StatePaused
	}
	rec, err := m.st.GetSandbox(ctx, ref.ID)
	switch {
	case errdefs.IsNotFound(err):
		return m.young(ctx, ref)
	case err != nil:
		return true
	}
	return !m.owns(rec.ClientID) && State(rec.State).Live()
}

// owns reports whether a record made on node is this daemon's to run: its
// own (ClientID is the node's id), or one from before ids were recorded.
// Daemons sharing one PostgreSQL see each other's records and must not
// settle them against their own runtime.
func (m *Manager) owns(node string) bool { return node == "" || node == m.cfg.ClientID }
