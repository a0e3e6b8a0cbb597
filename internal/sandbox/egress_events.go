package sandbox

import (
	"fmt"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/eventlog"
)

// AppendEvent adds ev to the log of live sandbox id (the daemon's egress
// denials come this way). An unknown or killed sandbox is ErrNotFound, so
// a late event does not leave a log without a sandbox.
func (m *Manager) AppendEvent(id string, ev eventlog.Event) error {
	m.mu.Lock()
	_, ok := m.boxes[id]
	m.mu.Unlock()
	if !ok {
		return fmt.Errorf("sandbox %q: %w", id, errdefs.ErrNotFound)
	}
	return m.cfg.Events.Append(id, ev)
}
