package runtimetest

import (
	"context"
	"errors"
	"time"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/runtime"
)

// maxExitNotice is how long a Waiter may take to report a supervisor
// killed from outside (issue 12: the daemon knows within a second).
const maxExitNotice = time.Second

// testWait checks runtime.Waiter: a supervisor killed from outside ends
// Wait at once with ExitKilled, and Stopped says so afterwards; a stopped,
// unknown or cancelled wait answers with the documented errors; a Delete
// ends a wait too.
func testWait(s *suite) {
	w, ok := s.rt.(runtime.Waiter)
	if !ok {
		return // an optional ability; backends that have it are checked
	}
	if s.opts.KillSupervisor == nil {
		s.t.Fatalf("%s implements runtime.Waiter: Options.KillSupervisor is required", s.rt.Name())
	}
	ctx := context.Background()
	id := NewID()
	s.create(id)
	cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	if _, err := w.Wait(cctx, id); !errors.Is(err, context.DeadlineExceeded) {
		s.t.Fatalf("Wait on a running sandbox with a 200 ms deadline: %v, want DeadlineExceeded", err)
	}
	cancel()
	if _, err := w.Stopped(ctx, id); !errors.Is(err, errdefs.ErrConflict) {
		s.t.Fatalf("Stopped on a running sandbox: %v, want ErrConflict", err)
	}
	type result struct {
		exit runtime.Exit
		err  error
		at   time.Time
	}
	done := make(chan result, 1)
	go func() {
		ex, err := w.Wait(ctx, id)
		done <- result{ex, err, time.Now()}
	}()
	time.Sleep(100 * time.Millisecond) // let Wait reach its wait
	killed := time.Now()
	s.opts.KillSupervisor(s.t, id)
	select {
	case res := <-done:
		took := res.at.Sub(killed)
		s.t.Logf("timing: %s supervisor killed → Wait returns %v", s.rt.Name(), took)
		if res.err != nil || res.exit.Reason != runtime.ExitKilled {
			s.t.Fatalf("Wait after a kill from outside = %+v, %v; want reason %q", res.exit, res.err, runtime.ExitKilled)
		}
		if took > maxExitNotice {
			s.t.Fatalf("Wait returned %v after the kill, want < %v", took, maxExitNotice)
		}
	case <-time.After(10 * time.Second):
		s.t.Fatalf("Wait did not return 10 s after the supervisor was killed")
	}
	testAfterExit(s, w, id)
	if err := s.rt.Delete(ctx, id); err != nil {
		s.t.Fatalf("Delete of a killed sandbox: %v", err)
	}
	s.wantGone(id)
	testWaitDelete(s, w)
}

// testAfterExit checks what a Waiter answers about sandbox id once its
// supervisor was killed from outside: a Wait is a conflict, and Stopped
// (asked as the daemon asks when the sandbox stopped before its wait
// began) still tells why. Unknown ids are ErrNotFound.
func testAfterExit(s *suite, w runtime.Waiter, id string) {
	ctx := context.Background()
	if _, err := w.Wait(ctx, id); !errors.Is(err, errdefs.ErrConflict) {
		s.t.Fatalf("Wait on a stopped sandbox: %v, want ErrConflict", err)
	}
	if _, err := w.Wait(ctx, NewID()); !errors.Is(err, errdefs.ErrNotFound) {
		s.t.Fatalf("Wait on an unknown id: %v, want ErrNotFound", err)
	}
	if ex, err := w.Stopped(ctx, id); err != nil || ex.Reason != runtime.ExitKilled {
		s.t.Fatalf("Stopped after a kill from outside = %+v, %v; want reason %q", ex, err, runtime.ExitKilled)
	}
	if _, err := w.Stopped(ctx, NewID()); !errors.Is(err, errdefs.ErrNotFound) {
		s.t.Fatalf("Stopped on an unknown id: %v, want ErrNotFound", err)
	}
}

// testWaitDelete checks that deleting a sandbox ends a wait on it.
func testWaitDelete(s *suite, w runtime.Waiter) {
	ctx := context.Background()
	id := NewID()
	s.create(id)
	done := make(chan error, 1)
	go func() {
		_, err := w.Wait(ctx, id)
		done <- err
	}()
	time.Sleep(100 * time.Millisecond)
	if err := s.rt.Delete(ctx, id); err != nil {
		s.t.Fatalf("Delete: %v", err)
	}
	select {
	case err := <-done:
		if err != nil {
			s.t.Fatalf("Wait across a Delete: %v", err)
		}
	case <-time.After(10 * time.Second):
		s.t.Fatalf("Wait did not return after Delete")
	}
}
