package daemon

import (
	"fmt"

	"github.com/forkbox/forkbox/internal/hostmm"
)

// Default concurrent-sandbox limit (--max-sandboxes 0):
//
//	min(maxSandboxesCap, max(1, (MemTotal − hostReserveMiB) / perSandboxMiB))
//
// perSandboxMiB is about three idle base sandboxes' host memory (35–45 MiB
// each in docs/benchmarks.md), so each has room to work before the host
// runs short; hostReserveMiB is kept for the daemon, runsc's page cache
// and the host itself. The cap bounds what a huge host starts with by
// default; --max-sandboxes sets any number up to the network slots of a
// daemon's /16 (netns.MaxSlots), which pool and standby sandboxes share.
const (
	perSandboxMiB   = 128
	hostReserveMiB  = 2048
	maxSandboxesCap = 1000
)

// defaultMaxSandboxes applies the formula to the host's MemTotal.
func defaultMaxSandboxes(memTotalMiB int64) int {
	n := (memTotalMiB - hostReserveMiB) / perSandboxMiB
	return int(min(maxSandboxesCap, max(1, n)))
}

// maxSandboxes resolves --max-sandboxes: n > 0 as given, 0 from host memory.
func maxSandboxes(n int) (int, error) {
	if n < 0 {
		return 0, fmt.Errorf("--max-sandboxes %d: must be 0 (from host memory) or more", n)
	}
	if n > 0 {
		return n, nil
	}
	mem, err := hostmm.MemInfoMiB("MemTotal")
	if err != nil {
		return 0, fmt.Errorf("--max-sandboxes default: %w", err)
	}
	return defaultMaxSandboxes(mem), nil
}
