package gvisor

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/forkbox/forkbox/internal/runtime"
	"github.com/forkbox/forkbox/internal/runtime/runtimetest"
)

// TestPrecompiledSeccomp checks that the runsc under test was built by
// scripts/build-runsc.sh: its sentry and gofer load precompiled seccomp
// programs on start and on restore. A plain `go build` of runsc compiles
// them at every start instead (0.1–0.3 s of CPU per sandbox, measured).
func TestPrecompiledSeccomp(t *testing.T) {
	logs := restoreWithDebugLogs(t)
	loaded, missing := scanSeccompLogs(t, logs)
	// Two sandboxes, each a sentry and a gofer.
	if loaded < 4 || len(missing) > 0 {
		t.Fatalf("runsc %s: %d filters loaded precompiled, compiled at run time: %q\n"+
			"build runsc with scripts/build-runsc.sh (make build)", env.runsc, loaded, missing)
	}
}

// restoreWithDebugLogs creates a sandbox and restores a clone of it, both
// with runsc debug logs, and returns the logs' directory.
func restoreWithDebugLogs(t *testing.T) string {
	t.Helper()
	setup(t)
	ctx := context.Background()
	r, err := newGvisor()
	if err != nil {
		t.Fatal(err)
	}
	logs := t.TempDir()
	r.cfg.DebugLogDir = logs
	spec := testSpec(runtimetest.NewID(), false)
	if _, err := r.Create(ctx, spec); err != nil {
		t.Fatalf("Create: %v", err)
	}
	t.Cleanup(func() { r.Delete(ctx, spec.ID) })
	waitAnswer(t, r, spec.ID)
	img := t.TempDir()
	if err := r.Checkpoint(ctx, spec.ID, img, runtime.CheckpointOptions{LeaveRunning: true}); err != nil {
		t.Fatalf("Checkpoint: %v", err)
	}
	clone := testSpec(runtimetest.NewID(), false)
	if _, err := r.Restore(ctx, clone, img); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	t.Cleanup(func() { r.Delete(ctx, clone.ID) })
	waitAnswer(t, r, clone.ID)
	return logs
}

// logLines returns the lines of the runsc debug logs in dir that contain
// what.
func logLines(t *testing.T, dir, what string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no runsc debug logs in %s (%v)", dir, err)
	}
	var out []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, what) {
				out = append(out, line)
			}
		}
	}
	return out
}

// scanSeccompLogs counts the precompiled filters runsc debug logs report,
// and returns the lines of filters compiled at run time.
func scanSeccompLogs(t *testing.T, dir string) (loaded int, missing []string) {
	t.Helper()
	return len(logLines(t, dir, "Loaded precompiled seccomp instructions")), logLines(t, dir, "No precompiled program found")
}
