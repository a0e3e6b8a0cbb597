package sandbox

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/images"
	"github.com/forkbox/forkbox/internal/runtime"
)

// TestRollbackFailureKeepsPausedSandbox: a paused sandbox whose rollback
// fails — its restore fails, or the restored agent does not answer — stays
// paused with its pause image, and resumes with its memory, as after a
// failed resume.
func TestRollbackFailureKeepsPausedSandbox(t *testing.T) {
	for _, tc := range []struct {
		name string
		// breakRollback makes the rollback to snap fail; agent is the
		// paused sandbox's agent (as it was before the pause).
		breakRollback func(e *env)
		wantErr       error
	}{
		{"restore fails", func(e *env) {
			e.rt.FailRestore = func(runtime.Spec, string) error { return errdefs.ErrResourceExhausted }
		}, errdefs.ErrResourceExhausted},
		{"agent does not answer", nil, errdefs.ErrUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			agents := trackAgents(e)
			ctx := context.Background()
			sb := e.create(t, CreateRequest{})
			e.count(t, sb.ID) // 1
			// The snapshot's agent refuses /init when it is the one broken.
			agent := agents.get(sb.ID)
			agent.setFail(tc.breakRollback == nil)
			snap, err := e.m.Snapshot(ctx, sb.ID, SnapshotOptions{})
			if err != nil {
				t.Fatal(err)
			}
			agent.setFail(false)
			e.count(t, sb.ID) // 2, kept by the pause
			if err := e.m.Pause(ctx, sb.ID); err != nil {
				t.Fatal(err)
			}
			e.waitState(t, sb.ID, StatePaused)
			image, err := e.m.img.Open(ctx, images.Pause(sb.ID))
			if err != nil {
				t.Fatal(err)
			}
			if tc.breakRollback != nil {
				tc.breakRollback(e)
			}
			if _, err := e.m.Rollback(ctx, sb.ID, snap.ID); !errors.Is(err, tc.wantErr) {
				t.Fatalf("rollback: %v, want %v", err, tc.wantErr)
			}
			e.rt.FailRestore = nil
			got, err := e.m.Get(ctx, sb.ID)
			if err != nil || got.State != StatePaused || e.imageDir(sb.ID) != image {
				t.Fatalf("after failed rollback: %+v %v; want paused with image %s", got, err, image)
			}
			if !e.hasImage(images.Pause(sb.ID)) {
				t.Fatalf("pause image %s is gone", image)
			}
			if ids := e.runtimeIDs(t); len(ids) != 0 {
				t.Errorf("failed rollback left runtime sandboxes: %v", ids)
			}
			if _, resumed, err := e.m.Connect(ctx, sb.ID, 0); err != nil || !resumed {
				t.Fatalf("resume after failed rollback: resumed=%v %v", resumed, err)
			}
			if n := e.count(t, sb.ID); n != 3 {
				t.Errorf("count after resume = %d, want 3 (pause memory)", n)
			}
			if e.hasImage(images.Pause(sb.ID)) {
				t.Errorf("pause image kept after resume: %v", err)
			}
		})
	}
}

// agentSet records the agent first created for each sandbox.
type agentSet struct {
	mu sync.Mutex
	by map[string]*memAgent
}

func trackAgents(e *env) *agentSet {
	s := &agentSet{by: map[string]*memAgent{}}
	e.rt.Handler = func(id string) http.Handler {
		a := &memAgent{inits: &e.inits}
		s.mu.Lock()
		defer s.mu.Unlock()
		s.by[id] = a
		return a
	}
	return s
}

func (s *agentSet) get(id string) *memAgent {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.by[id]
}
