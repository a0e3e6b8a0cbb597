package gvisor

import (
	"slices"
	"testing"
)

// Sandboxes sleep while they wait for a syscall's answer unless the
// systrap fast path is asked for: spinning sandboxes starve each other
// on a small host (docs/benchmarks.md, "Idle CPU and bursts").
func TestGlobalArgsFastPath(t *testing.T) {
	for _, tt := range []struct {
		fastPath bool
		want     bool // --systrap-disable-fast-path given
	}{
		{false, true},
		{true, false},
	} {
		r := &Runtime{cfg: Config{StateDir: t.TempDir(), SystrapFastPath: tt.fastPath}}
		if got := slices.Contains(r.globalArgs(), "--systrap-disable-fast-path"); got != tt.want {
			t.Errorf("SystrapFastPath %v: --systrap-disable-fast-path given %v, want %v", tt.fastPath, got, tt.want)
		}
	}
}
