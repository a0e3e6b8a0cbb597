package sandbox

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/store"
)

// downPlacer is a CopyPlacer whose other node does not answer its first
// down kills.
type downPlacer struct {
	mu    sync.Mutex
	down  int
	kills int
}

func (p *downPlacer) PlaceCopy(context.Context, []string) (string, error) { return "node-b", nil }

func (p *downPlacer) StartCopy(context.Context, string, string, string, time.Duration) (string, error) {
	return "", errdefs.ErrInternal
}

func (p *downPlacer) KillCopy(_ context.Context, node, id string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.kills++
	if p.kills <= p.down {
		return fmt.Errorf("node %s: connection refused: %w", node, errdefs.ErrUnavailable)
	}
	return nil
}

func (p *downPlacer) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.kills
}

// TestKillCopyLater: the undo of a failed strict clone whose copy's node
// does not answer kills the copy once the node answers again, and stops
// asking once the copy's record says it is gone (the node was declared
// dead).
func TestKillCopyLater(t *testing.T) {
	for _, tc := range []struct {
		name      string
		lostAfter time.Duration // the record is marked killed then (0: never)
		wantKills int
	}{
		{"node back", 0, 4},
		{"node declared dead", 3 * time.Second, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := context.Background()
				e := newEnv(t)
				e.m.cfg.ClientID = "node-a"
				p := &downPlacer{down: 3}
				e.m.SetCopyPlacer(p)
				rec := &store.Sandbox{ID: "copy1", ClientID: "node-b", State: string(StateRunning), TemplateID: "base"}
				if err := e.st.PutSandbox(ctx, rec); err != nil {
					t.Fatal(err)
				}
				if tc.lostAfter > 0 {
					time.AfterFunc(tc.lostAfter, func() {
						rec.State = string(StateKilled)
						e.st.PutSandbox(ctx, rec)
					})
				}
				e.m.killAll(ctx, []*Sandbox{{ID: "copy1", ClientID: "node-b"}})
				time.Sleep(copyKillPatience + time.Minute)
				synctest.Wait()
				if got := p.count(); got != tc.wantKills {
					t.Errorf("kills asked of node-b: %d, want %d", got, tc.wantKills)
				}
			})
		})
	}
}
