package cluster

import (
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/forkbox/forkbox/internal/hostmm"
	"github.com/forkbox/forkbox/internal/store"
)

// HostReport reads the host's available memory, CPU count and load
// average; a value the host does not expose reads as zero, since a
// heartbeat without it beats no heartbeat.
func HostReport() store.Report {
	// MemAvailable, not MemFree: reclaimable page cache is free to use.
	free, _ := hostmm.MemInfoMiB("MemAvailable")
	return store.Report{FreeMemoryMiB: free, CPUs: runtime.NumCPU(), Load1: load1(), Version: Version()}
}

// load1 is the one-minute load average of /proc/loadavg.
func load1() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}

// Version names the forkbox build: the module version, or the commit a
// development build was made from (with "+dirty" for local changes).
func Version() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev, dirty string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+dirty"
			}
		}
	}
	if rev == "" {
		return "devel"
	}
	return "devel-" + rev[:min(12, len(rev))] + dirty
}
