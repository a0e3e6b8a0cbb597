package gvisor

import (
	"fmt"
	"testing"
)

// The ladder starts next to the usage, alternating up and down, and spans
// the sandbox's memory above it.
func TestRungs(t *testing.T) {
	const mib = 1 << 20
	for _, tt := range []struct {
		now, memory, step uint64
		want              string
	}{
		{100 * mib, 64 * mib, 16 * mib, "[116 96 132 80 148 64 164 48 180 32 16]"},
		{5 * mib, 32 * mib, 16 * mib, "[21 37 53]"},
		{32 * mib, 16 * mib, 16 * mib, "[48 32 64 16]"},
	} {
		got := rungs(tt.now, tt.memory, tt.step)
		mibs := make([]uint64, len(got))
		for i, l := range got {
			mibs[i] = l / mib
		}
		if s := fmt.Sprint(mibs); s != tt.want {
			t.Errorf("rungs(%d, %d, %d MiB) = %s MiB, want %s", tt.now/mib, tt.memory/mib, tt.step/mib, s, tt.want)
		}
	}
	if n := len(rungs(0, 1<<40, 1<<20)); n != maxRungs {
		t.Errorf("a huge sandbox: %d rungs, want at most %d", n, maxRungs)
	}
}
