package sandbox

import (
	"context"
	"testing"
	"time"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/store"
)

// A dead node may leave the registry only once none of its sandboxes is
// recorded running: LoseNode records them lost (a paused one stays
// paused), after which CheckNodeRemovable lets it go; other nodes'
// sandboxes do not count.
func TestLoseNodeThenRemovable(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.m.cfg.ClientID = "node-a"
	for _, rec := range []*store.Sandbox{
		{ID: "run1", ClientID: "node-b", State: string(StateRunning), TemplateID: "base"},
		{ID: "paused1", ClientID: "node-b", State: string(StatePaused), TemplateID: "base"},
		{ID: "other1", ClientID: "node-c", State: string(StateRunning), TemplateID: "base"},
	} {
		if err := e.st.PutSandbox(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.m.CheckNodeRemovable(ctx, "node-b"); !errdefs.IsConflict(err) {
		t.Fatalf("node-b with a running sandbox: %v, want a conflict", err)
	}
	if n, err := e.m.LoseNode(ctx, "node-b", time.Now()); err != nil || n != 1 {
		t.Fatalf("LoseNode = %d, %v; want 1 lost", n, err)
	}
	for id, want := range map[string]State{"run1": StateKilled, "paused1": StatePaused, "other1": StateRunning} {
		if rec, err := e.st.GetSandbox(ctx, id); err != nil || State(rec.State) != want {
			t.Errorf("%s after LoseNode: %+v, %v; want %s", id, rec, err, want)
		}
	}
	if err := e.m.CheckNodeRemovable(ctx, "node-b"); err != nil {
		t.Errorf("node-b once its sandboxes are lost: %v", err)
	}
	if n, err := e.m.LoseNode(ctx, "node-a", time.Now()); err != nil || n != 0 {
		t.Errorf("LoseNode of this node itself = %d, %v; want nothing done", n, err)
	}
}
