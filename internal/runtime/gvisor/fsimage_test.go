package gvisor

import (
	"context"
	"testing"

	"github.com/forkbox/forkbox/internal/runtime"
	"github.com/forkbox/forkbox/internal/runtime/runtimetest"
)

// TestRestoreFromFilesCheckpointWithStandby: a memory checkpoint of a
// sandbox booted from saved files (a filesystem-only pause resumed, then
// paused with memory) restores while a standby container of its shape is
// ready. A standby's runsc runs with the strict restore-spec check, which
// refuses the files annotation the image carries — the 500 of a connect
// after such a pause.
func TestRestoreFromFilesCheckpointWithStandby(t *testing.T) {
	ctx := context.Background()
	r := newStandbyRuntime(t, 1)
	src := testSpec(runtimetest.NewID(), false)
	if _, err := r.Create(ctx, src); err != nil {
		t.Fatal(err)
	}
	defer r.Delete(ctx, src.ID)
	waitAnswer(t, r, src.ID)
	files := t.TempDir()
	if err := r.SaveFilesystem(ctx, src.ID, files); err != nil {
		t.Fatal(err)
	}
	booted := testSpec(runtimetest.NewID(), false)
	if _, err := r.CreateFromFilesystem(ctx, booted, files); err != nil {
		t.Fatal(err)
	}
	defer r.Delete(ctx, booted.ID)
	waitAnswer(t, r, booted.ID)
	img := t.TempDir()
	if err := r.Checkpoint(ctx, booted.ID, img, runtime.CheckpointOptions{LeaveRunning: true}); err != nil {
		t.Fatal(err)
	}
	restoreAnswering(t, r, img) // no standby yet: one is made after it
	waitStandby(t, r, 1)
	restoreAnswering(t, r, img)
}
