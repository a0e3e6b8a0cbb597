package gchold

import (
	"runtime/debug"
	"testing"
)

// sink keeps the test's allocations from being optimised away.
var sink [][]byte

// churn allocates n bytes of garbage in 64 KiB pieces, keeping only the
// last few.
func churn(n int) {
	for i := 0; i < n>>16; i++ {
		sink = append(sink, make([]byte, 64<<10))
		if len(sink) > 4 {
			sink = sink[1:]
		}
	}
}

// TestHoldRunsNoCycles: while held, 48 MiB of garbage within the headroom
// starts no collection; release puts the collector's settings back.
func TestHoldRunsNoCycles(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(77))
	release := Hold(256<<20, 0)
	if p := debug.SetGCPercent(-1); p != -1 {
		t.Fatalf("GC percent while held = %d, want -1 (off)", p)
	}
	churn(48 << 20)
	if n := release(); n != 0 {
		t.Fatalf("%d GC cycles ran while held, want 0", n)
	}
	if p := debug.SetGCPercent(77); p != 77 {
		t.Fatalf("GC percent after release = %d, want 77 as before", p)
	}
	if l := debug.SetMemoryLimit(-1); l != 1<<63-1 {
		t.Fatalf("memory limit after release = %d, want none", l)
	}
}

// TestHoldIsBounded: garbage past the headroom is collected anyway.
func TestHoldIsBounded(t *testing.T) {
	release := Hold(8<<20, 0)
	churn(96 << 20)
	if n := release(); n == 0 {
		t.Fatal("no GC cycle ran though the heap grew 96 MiB past an 8 MiB headroom")
	}
}
