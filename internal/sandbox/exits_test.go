package sandbox

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/eventlog"
	"github.com/forkbox/forkbox/internal/runtime"
	"github.com/forkbox/forkbox/internal/runtime/fake"
	"github.com/forkbox/forkbox/internal/runtime/runtimetest"
)

// A sandbox whose supervisor dies on its own is killed at once, with the
// reason, visible through Describe; it leaves nothing in the runtime and
// the data plane refuses it.
func TestDeadSandboxIsKilledWithReason(t *testing.T) {
	for _, reason := range []runtime.ExitReason{
		runtime.ExitOutOfMemory, runtime.ExitProcessLimit, runtime.ExitCrashed, runtime.ExitKilled,
	} {
		t.Run(string(reason), func(t *testing.T) {
			e := newEnv(t)
			ctx := context.Background()
			sb := e.create(t, CreateRequest{})
			other := e.create(t, CreateRequest{})
			died := time.Now()
			if err := e.killWatched(t, sb.ID, reason); err != nil {
				t.Fatal(err)
			}
			got := waitDescribed(t, e, sb.ID)
			t.Logf("death → killed in %v", time.Since(died))
			if got.State != StateKilled || got.KillReason != string(reason) || got.KilledAt.IsZero() {
				t.Fatalf("Describe = state %s reason %q at %v; want killed, %q", got.State, got.KillReason, got.KilledAt, reason)
			}
			evs, err := e.m.Logs(ctx, sb.ID, eventlog.Query{})
			if err != nil || !slices.ContainsFunc(evs, func(ev eventlog.Event) bool {
				return ev.Message == "sandbox died" && ev.Fields["reason"] == string(reason)
			}) {
				t.Errorf("Logs of a dead sandbox = %+v, %v; want a \"sandbox died\" entry", evs, err)
			}
			if _, err := e.m.Get(ctx, sb.ID); !errdefs.IsNotFound(err) {
				t.Errorf("Get of a dead sandbox: %v, want ErrNotFound", err)
			}
			if _, err := e.m.Dial(ctx, sb.ID, 49983); !errdefs.IsNotFound(err) {
				t.Errorf("Dial of a dead sandbox: %v, want ErrNotFound", err)
			}
			if ids := e.runtimeIDs(t); len(ids) != 1 || ids[0] != other.ID {
				t.Errorf("runtime holds %v, want only %s", ids, other.ID)
			}
			if n := e.count(t, other.ID); n != 1 {
				t.Errorf("the other sandbox's count = %d", n)
			}
			e.shutdown(t)
		})
	}
}

// The exits of the Manager's own operations are not deaths: a pause stops
// the sandbox, a rollback replaces it; afterwards a death is still seen.
func TestOwnStopsAreNotDeaths(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	sb := e.create(t, CreateRequest{})
	if err := e.m.Pause(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	e.waitState(t, sb.ID, StatePaused)
	if _, _, err := e.m.Connect(ctx, sb.ID, time.Minute); err != nil {
		t.Fatal(err)
	}
	snap, err := e.m.Snapshot(ctx, sb.ID, SnapshotOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.Rollback(ctx, sb.ID, snap.ID); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // a wrongly seen death would be handled by now
	if got, err := e.m.Get(ctx, sb.ID); err != nil || got.State != StateRunning {
		t.Fatalf("after pause, resume, snapshot and rollback: %+v, %v; want running", got, err)
	}
	if err := e.killWatched(t, sb.ID, runtime.ExitOutOfMemory); err != nil {
		t.Fatal(err)
	}
	if got := waitDescribed(t, e, sb.ID); got.KillReason != string(runtime.ExitOutOfMemory) {
		t.Fatalf("reason after rollback = %q", got.KillReason)
	}
}

// killWatched kills id for reason once the Manager waits on it: a death
// before the wait (just after a create) is seen only as "stopped before the
// daemon could wait on it", without its reason.
func (e *env) killWatched(t *testing.T, id string, reason runtime.ExitReason) error {
	t.Helper()
	deadline := time.Now().Add(time.Second)
	for !e.rt.Waiting(id) {
		if time.Now().After(deadline) {
			t.Fatalf("the Manager does not wait on %s a second after its start", id)
		}
		time.Sleep(time.Millisecond)
	}
	return e.rt.KillWith(id, reason)
}

// waitDescribed waits up to a second for id to be recorded dead.
func waitDescribed(t *testing.T, e *env, id string) *Sandbox {
	t.Helper()
	deadline := time.Now().Add(time.Second)
	for {
		sb, err := e.m.Describe(context.Background(), id)
		if err == nil && sb.State == StateKilled {
			return sb
		}
		if time.Now().After(deadline) {
			t.Fatalf("sandbox %s not killed a second after its death: %+v, %v", id, sb, err)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// A death before the Manager's wait began keeps the reason the backend
// can still tell; one it cannot tell, or a backend that fails, is killed.
func TestStoppedExit(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	rt := fake.New() // the Manager's own would race its watchers
	for _, tc := range []struct {
		name   string
		kill   func(id string) error
		reason runtime.ExitReason
	}{
		{"process limit", func(id string) error { return rt.KillWith(id, runtime.ExitProcessLimit) }, runtime.ExitProcessLimit},
		{"running", func(string) error { return nil }, runtime.ExitKilled},
		{"unknown", func(id string) error { return rt.Delete(ctx, id) }, runtime.ExitKilled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := runtimetest.NewID()
			if _, err := rt.Create(ctx, runtime.Spec{ID: id, RootFS: t.TempDir()}); err != nil {
				t.Fatal(err)
			}
			if err := tc.kill(id); err != nil {
				t.Fatal(err)
			}
			ex := e.m.stoppedExit(ctx, rt, id)
			if ex.Reason != tc.reason || !strings.Contains(ex.Detail, "before the daemon could wait") || ex.At.IsZero() {
				t.Errorf("stoppedExit = %+v, want %q, said to be late", ex, tc.reason)
			}
		})
	}
}
