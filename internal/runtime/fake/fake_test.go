package fake

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/runtime"
	"github.com/forkbox/forkbox/internal/runtime/runtimetest"
)

var failArgs = []string{"/nonexistent/binary"}

func newRuntime(t *testing.T) runtime.Runtime {
	r := New()
	r.Handler = func(id string) http.Handler {
		return &runtimetest.Handler{Grow: func(n int64) { r.GrowMemory(id, n) }}
	}
	r.FailCreate = func(spec runtime.Spec) error {
		if slices.Equal(spec.Args, failArgs) {
			return errors.New("exec: no such file")
		}
		return nil
	}
	return r
}

func TestConformance(t *testing.T) {
	var cur *Runtime
	runtimetest.Run(t, func(t *testing.T) runtime.Runtime {
		cur = newRuntime(t).(*Runtime)
		return cur
	}, runtimetest.Options{
		RootFS:   t.TempDir(),
		Args:     []string{"server"},
		Port:     49983,
		FailArgs: failArgs,
		KillSupervisor: func(t *testing.T, id string) {
			if err := cur.Kill(id); err != nil {
				t.Fatalf("fake Kill: %v", err)
			}
		},
	})
}

func TestKillAndMarker(t *testing.T) {
	ctx := context.Background()
	r := newRuntime(t).(*Runtime)
	spec := runtime.Spec{ID: runtimetest.NewID(), RootFS: t.TempDir(), Args: []string{"x"}}
	if _, err := r.Create(ctx, spec); err != nil {
		t.Fatal(err)
	}
	img := t.TempDir()
	if err := r.Checkpoint(ctx, spec.ID, img, runtime.CheckpointOptions{LeaveRunning: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(img, MarkerFile)); err != nil {
		t.Fatalf("marker: %v", err)
	}
	if err := r.Kill(spec.ID); err != nil {
		t.Fatal(err)
	}
	info, err := r.Info(ctx, spec.ID)
	if err != nil || info.State != runtime.StateStopped {
		t.Fatalf("Info after Kill = %+v, %v", info, err)
	}
	if _, err := r.Dial(ctx, spec.ID, 1); !errors.Is(err, errdefs.ErrUnavailable) {
		t.Fatalf("Dial stopped: %v", err)
	}
	os.Remove(filepath.Join(img, MarkerFile))
	spec.ID = runtimetest.NewID()
	if _, err := r.Restore(ctx, spec, img); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Fatalf("Restore from a collected image: %v", err)
	}
}
