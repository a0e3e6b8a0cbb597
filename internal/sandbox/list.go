package sandbox

import (
	"context"
	"time"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/store"
)

// ListOrder holds the listing's order and the filters E2B's v2 listing
// added (newest first, startedAfter, template).
type ListOrder struct {
	// Desc lists the newest sandbox first.
	Desc bool
	// StartedAfter keeps sandboxes started at or after it (zero: all).
	StartedAfter time.Time
	// Template keeps sandboxes of this template id or name ("": all). A
	// name no template has matches nothing.
	Template string
}

// applyListOrder copies o into sf, resolving a template name to its id.
func (m *Manager) applyListOrder(ctx context.Context, o ListOrder, sf *store.SandboxFilter) error {
	sf.Desc, sf.StartedAfter = o.Desc, o.StartedAfter
	if o.Template == "" {
		return nil
	}
	sf.Templates = []string{o.Template}
	t, err := m.st.GetTemplate(ctx, o.Template)
	switch {
	case err == nil:
		sf.Templates = append(sf.Templates, t.ID)
		sf.Templates = append(sf.Templates, t.Aliases...)
	case !errdefs.IsNotFound(err):
		return err
	}
	// An unknown name still matches sandboxes whose template was deleted
	// since: their records keep its id and alias.
	return nil
}

// CountRunning returns how many sandboxes run (GET /v2/sandboxes answers
// it in X-Total-Running).
func (m *Manager) CountRunning(ctx context.Context) (int, error) {
	return m.st.CountSandboxes(ctx, []string{string(StateCreating), string(StateRunning), string(StateSnapshotting)})
}
