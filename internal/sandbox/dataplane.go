package sandbox

import (
	"context"
	"fmt"
	"net"

	"github.com/forkbox/forkbox/internal/errdefs"
)

// Dial opens a connection to port inside a running sandbox, for the
// data-plane proxy. A sandbox that is not running answers ErrConflict (it is
// being paused, or is paused) and an unknown one ErrNotFound.
func (m *Manager) Dial(ctx context.Context, id string, port int) (net.Conn, error) {
	if err := m.checkRunning(id); err != nil {
		if !errdefs.IsConflict(err) || !m.autoResumes(id) {
			return nil, err
		}
		// Traffic for a paused auto-resume sandbox wakes it up.
		if _, _, err := m.Connect(ctx, id, 0); err != nil {
			return nil, err
		}
	}
	conn, err := m.rt.Dial(ctx, id, port)
	if err != nil {
		return nil, fmt.Errorf("sandbox %s port %d: %w", id, port, errdefs.ErrUnavailable)
	}
	return m.dataConns.track(id, conn), nil
}

// CheckRunning returns nil when the data plane may reach the sandbox.
func (m *Manager) checkRunning(id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, err := m.lookupLocked(id)
	if err != nil {
		return err
	}
	switch {
	case e.state == StateRunning,
		e.state == StateSnapshotting && e.from == StateRunning:
		return nil
	default:
		return fmt.Errorf("sandbox %s is %s: %w", id, e.state.Public(), errdefs.ErrConflict)
	}
}

// autoResumes reports whether id is a paused sandbox created with autoResume.
func (m *Manager) autoResumes(id string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.boxes[id]
	return ok && e.rec.AutoResume && (e.state == StatePaused || e.state == StatePausing || e.state == StateResuming) &&
		!isFilesystemImage(e.rec.ImageDir) // a cold boot is asked for, never caused by traffic
}
