package sandbox

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/forkbox/forkbox/internal/runtime"
	"github.com/forkbox/forkbox/internal/runtime/fake"
)

// gatedRestores is the fake runtime with each Restore held until release
// is closed; started is closed when the first one begins.
type gatedRestores struct {
	*fake.Runtime
	once             sync.Once
	started, release chan struct{}
}

func (g *gatedRestores) Restore(ctx context.Context, spec runtime.Spec, dir string) (runtime.Info, error) {
	g.once.Do(func() { close(g.started) })
	<-g.release
	return g.Runtime.Restore(ctx, spec, dir)
}

// A pool refill still restoring when the manager stops must not leave its
// sandbox running once Run has returned: no record and no pool lists it, so
// nothing would ever remove it (seen as a runsc sandbox left behind by a
// stopped daemon in TestSecondDaemonOnDataDirExits and the chaos test).
func TestPoolRefillRacingStopLeavesNothing(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	warmBase(t, e)
	g := &gatedRestores{Runtime: e.rt, started: make(chan struct{}), release: make(chan struct{})}
	e.m.rt = g
	e.m.cfg.PoolSize, e.m.cfg.PoolTemplates = 1, []string{"base"}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { e.m.Run(runCtx); close(done) }()
	<-g.started
	stop()
	time.Sleep(50 * time.Millisecond) // Run sees the end of its context
	close(g.release)
	<-done
	time.Sleep(50 * time.Millisecond) // a filler Run did not wait for ends now
	if ids := e.runtimeIDs(t); len(ids) != 0 {
		t.Fatalf("after Run returned the runtime holds %v, want nothing (pool drained)", ids)
	}
}
