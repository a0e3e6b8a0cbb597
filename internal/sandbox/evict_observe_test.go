package sandbox

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/eventlog"
	"github.com/forkbox/forkbox/internal/runtime/fake"
)

// failingDelete is the fake runtime with every Delete failing.
type failingDelete struct{ *fake.Runtime }

func (failingDelete) Delete(ctx context.Context, id string) error {
	return fmt.Errorf("injected: delete %s: %w", id, errdefs.ErrInternal)
}

// observed records what an Observer hears.
type observed struct {
	mu   sync.Mutex
	errs map[Operation][]error
}

func (o *observed) Observe(op Operation, d time.Duration, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.errs == nil {
		o.errs = map[Operation][]error{}
	}
	o.errs[op] = append(o.errs[op], err)
}

// An expiry that kills reports the kill's own outcome: a sandbox whose
// runtime side could not be deleted is an eviction error, although the
// sandbox is gone from the Manager's view (reading the state afterwards
// called that a success).
func TestEvictionKillReportsItsOwnOutcome(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	sb := e.create(t, CreateRequest{})
	obs := &observed{}
	e.m.cfg.Observer = obs
	e.m.rt = failingDelete{e.rt}
	sweepExpired(ctx, e, sb.ID)
	obs.mu.Lock()
	defer obs.mu.Unlock()
	errs := obs.errs[OpEvict]
	if len(errs) != 1 || errs[0] == nil {
		t.Fatalf("evict observed %v, want one error (the failed delete)", errs)
	}
}

// A sandbox's log says its timeout expired it and what that did, in E2B's
// onTimeout words ("pause"; a killed sandbox's log goes with it).
func TestExpiryLogsItsAction(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	sb := e.create(t, CreateRequest{AutoPause: true})
	sweepExpired(ctx, e, sb.ID)
	evs, err := e.m.Logs(ctx, sb.ID, eventlog.Query{Search: "sandbox expired"})
	if err != nil || len(evs) != 1 || evs[0].Fields["action"] != "pause" {
		t.Fatalf("expiry events %+v, %v; want one with action pause", evs, err)
	}
}

// sweepExpired makes sandbox id's deadline pass and runs one sweep of the
// evictor to its end.
func sweepExpired(ctx context.Context, e *env, id string) {
	e.m.mu.Lock()
	e.m.boxes[id].rec.EndAt = e.m.now().Add(-time.Second)
	e.m.mu.Unlock()
	var wg sync.WaitGroup
	e.m.sweep(ctx, &wg)
	wg.Wait()
}
