package gvisor

import (
	"strings"
	"testing"
)

// TestRestoreHoldsGC checks that the runsc under test holds its garbage
// collector off while a restore decodes the kernel's state
// (patches/gvisor/0003-restore-hold-gc): the restored sentry's debug log
// says how many cycles ran while held, and none did. An unpatched runsc
// logs no such line, and one that collected would count its cycles.
func TestRestoreHoldsGC(t *testing.T) {
	lines := logLines(t, restoreWithDebugLogs(t), "GC cycles ran while the collector was held")
	if len(lines) != 1 {
		t.Fatalf("runsc %s: %d restores said how many GC cycles ran while held, want 1 (built without patches/gvisor/0003?): %q",
			env.runsc, len(lines), lines)
	}
	if !strings.Contains(lines[0], "Restore: 0 GC cycles") {
		t.Fatalf("the collector ran during the restore: %s", lines[0])
	}
}
