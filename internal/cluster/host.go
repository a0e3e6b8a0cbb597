package cluster

import (
	"bufio"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/forkbox/forkbox/internal/store"
)

// HostReport reads the host's available memory, CPU count and load
// average; a value the host does not expose reads as zero, since a
// heartbeat without it beats no heartbeat.
func HostReport() store.Report {
	return store.Report{FreeMemoryMiB: memAvailableMiB(), CPUs: runtime.NumCPU(), Load1: load1(), Version: Version()}
}

// memAvailableMiB is MemAvailable of /proc/meminfo: what the kernel can
// hand out without swapping (MemFree ignores reclaimable page cache).
func memAvailableMiB() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok || name != "MemAvailable" {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		if err != nil {
			return 0
		}
		return kb / 1024
	}
	return 0
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
