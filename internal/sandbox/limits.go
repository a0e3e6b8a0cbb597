package sandbox

import (
	"bufio"
	"fmt"
	"os"
	goruntime "runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/forkbox/forkbox/internal/errdefs"
)

// Limits bound what one sandbox may ask for, so a request cannot promise a
// sandbox more than the host has (serve's --max-sandbox-cpus,
// --max-sandbox-memory, --max-sandbox-disk). A zero field is no bound.
type Limits struct {
	// MaxCPUs is the most CPUs a sandbox may have.
	MaxCPUs int
	// MaxMemoryMB is the most memory a sandbox may have, in MiB.
	MaxMemoryMB int
	// MaxDiskMB is the largest writable filesystem a sandbox may have, in MiB.
	MaxDiskMB int
}

// HostLimits returns the host's own bounds: its CPUs, its memory and the
// disk space free under dataDir.
func HostLimits(dataDir string) (Limits, error) {
	mem, err := hostMemoryMB()
	if err != nil {
		return Limits{}, err
	}
	var fs unix.Statfs_t
	if err := unix.Statfs(dataDir, &fs); err != nil {
		return Limits{}, fmt.Errorf("free disk under %s: %w", dataDir, err)
	}
	disk := int(fs.Bavail * uint64(fs.Bsize) >> 20)
	return Limits{MaxCPUs: goruntime.NumCPU(), MaxMemoryMB: mem, MaxDiskMB: disk}, nil
}

// hostMemoryMB is MemTotal of /proc/meminfo in MiB.
func hostMemoryMB() (int, error) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, fmt.Errorf("host memory: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
			kb, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			if err != nil {
				return 0, fmt.Errorf("host memory: %q: %w", v, err)
			}
			return kb >> 10, nil
		}
	}
	return 0, fmt.Errorf("host memory: no MemTotal in /proc/meminfo")
}

// check refuses a request beyond the limits with ErrInvalidArgument naming
// the limit (and the flag that sets it).
func (l Limits) check(req CreateRequest) error {
	for _, c := range []struct {
		field, flag, unit string
		v, max            int
	}{
		{"cpuCount", "--max-sandbox-cpus", "", req.CPUCount, l.MaxCPUs},
		{"memoryMB", "--max-sandbox-memory", " MiB", req.MemoryMB, l.MaxMemoryMB},
		{"diskSizeMB", "--max-sandbox-disk", " MiB", req.DiskSizeMB, l.MaxDiskMB},
	} {
		if c.v < 0 {
			return fmt.Errorf("%s must not be negative: %w", c.field, errdefs.ErrInvalidArgument)
		}
		if c.max > 0 && c.v > c.max {
			return fmt.Errorf("%s %d exceeds this host's limit of %d%s per sandbox (%s): %w",
				c.field, c.v, c.max, c.unit, c.flag, errdefs.ErrInvalidArgument)
		}
	}
	return nil
}
