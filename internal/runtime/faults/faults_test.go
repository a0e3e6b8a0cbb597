package faults

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/runtime"
	"github.com/forkbox/forkbox/internal/runtime/fake"
)

// A wrapped runtime still reports a sandbox's death through Wait (the
// Manager's exit watch type-asserts runtime.Waiter), and still fails the
// planned call.
func TestWrapKeepsWaiterAndFaults(t *testing.T) {
	ctx := context.Background()
	f := fake.New()
	rt, err := Wrap(f, "create=2")
	if err != nil {
		t.Fatal(err)
	}
	var wrapped runtime.Runtime = rt
	w, ok := wrapped.(runtime.Waiter)
	if !ok {
		t.Fatal("the wrapped runtime is no runtime.Waiter")
	}
	if _, ok := wrapped.(runtime.FilesystemSaver); !ok {
		t.Fatal("the wrapped runtime is no runtime.FilesystemSaver")
	}
	spec := runtime.Spec{ID: "aaaaaaaaaaaaaaaaaaaa", RootFS: t.TempDir(), Args: []string{"/agent"}}
	if _, err := rt.Create(ctx, spec); err != nil {
		t.Fatal(err)
	}
	spec.ID = "bbbbbbbbbbbbbbbbbbbb"
	if _, err := rt.Create(ctx, spec); !errors.Is(err, errdefs.ErrUnavailable) {
		t.Fatalf("second create: %v, want the injected fault", err)
	}
	got := make(chan runtime.Exit, 1)
	go func() {
		ex, err := w.Wait(ctx, "aaaaaaaaaaaaaaaaaaaa")
		if err != nil {
			t.Error(err)
		}
		got <- ex
	}()
	time.Sleep(20 * time.Millisecond)
	f.KillWith("aaaaaaaaaaaaaaaaaaaa", runtime.ExitOutOfMemory)
	select {
	case ex := <-got:
		if ex.Reason != runtime.ExitOutOfMemory {
			t.Fatalf("Wait says %q, want %q", ex.Reason, runtime.ExitOutOfMemory)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Wait did not return after the sandbox died")
	}
}
