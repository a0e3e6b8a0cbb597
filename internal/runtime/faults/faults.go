// Package faults wraps a runtime to fail chosen calls, so integration tests
// can check that a real daemon undoes a half-done operation (a strict clone
// whose second restore fails leaves nothing behind). The daemon wraps its
// runtime only when FORKBOX_FAULTS is set; production never does.
package faults

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/runtime"
)

// EnvVar names the fault specification, e.g. "restore=2" (the second
// Restore fails) or "restore=2,checkpoint=1".
const EnvVar = "FORKBOX_FAULTS"

// Runtime fails the n-th call of the listed methods and passes everything
// else to the wrapped backend, which must also be a runtime.Checkpointer.
type Runtime struct {
	runtime.Runtime
	cp runtime.Checkpointer

	mu    sync.Mutex
	plan  map[string]int // method → call number that fails
	calls map[string]int
}

// Wrap parses spec and wraps rt.
func Wrap(rt runtime.Runtime, spec string) (*Runtime, error) {
	cp, ok := rt.(runtime.Checkpointer)
	if !ok {
		return nil, fmt.Errorf("faults: %s cannot checkpoint: %w", rt.Name(), errdefs.ErrInvalidArgument)
	}
	plan := map[string]int{}
	for _, part := range strings.Split(spec, ",") {
		name, num, ok := strings.Cut(strings.TrimSpace(part), "=")
		n, err := strconv.Atoi(num)
		if !ok || err != nil || n < 1 {
			return nil, fmt.Errorf("faults: bad entry %q (want method=N): %w", part, errdefs.ErrInvalidArgument)
		}
		plan[name] = n
	}
	return &Runtime{Runtime: rt, cp: cp, plan: plan, calls: map[string]int{}}, nil
}

// fail counts a call of method and reports whether it is the planned one.
func (r *Runtime) fail(method string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls[method]++
	if r.plan[method] == r.calls[method] {
		return fmt.Errorf("injected fault: %s call %d: %w", method, r.calls[method], errdefs.ErrUnavailable)
	}
	return nil
}

// Create implements runtime.Runtime.
func (r *Runtime) Create(ctx context.Context, spec runtime.Spec) (runtime.Info, error) {
	if err := r.fail("create"); err != nil {
		return runtime.Info{}, err
	}
	return r.Runtime.Create(ctx, spec)
}

// Checkpoint implements runtime.Checkpointer.
func (r *Runtime) Checkpoint(ctx context.Context, id, dir string, o runtime.CheckpointOptions) error {
	if err := r.fail("checkpoint"); err != nil {
		return err
	}
	return r.cp.Checkpoint(ctx, id, dir, o)
}

// Restore implements runtime.Checkpointer. Like a real failed restore it
// leaves nothing behind (the Runtime contract); what the test checks is that
// the caller undoes the rest of its operation (other clones, the snapshot).
func (r *Runtime) Restore(ctx context.Context, spec runtime.Spec, dir string) (runtime.Info, error) {
	if err := r.fail("restore"); err != nil {
		return runtime.Info{}, err
	}
	return r.cp.Restore(ctx, spec, dir)
}

// Replace implements runtime.Checkpointer; it counts as "replace".
func (r *Runtime) Replace(ctx context.Context, spec runtime.Spec, dir string) (runtime.Info, error) {
	if err := r.fail("replace"); err != nil {
		return runtime.Info{}, err
	}
	return r.cp.Replace(ctx, spec, dir)
}
