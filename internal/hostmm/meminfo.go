package hostmm

import (
	"bufio"
	"fmt"
	"os"
	"strings"
)

// MemInfoMiB reads one field of /proc/meminfo (MemTotal, MemAvailable, …)
// in MiB: the daemon sizes its default sandbox limit from the host's
// memory and the node registry reports what is free.
func MemInfoMiB(field string) (int64, error) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			var kib int64
			if _, err := fmt.Sscanf(strings.TrimSpace(rest), "%d kB", &kib); err != nil {
				return 0, fmt.Errorf("meminfo %s %q: %w", field, rest, err)
			}
			return kib / 1024, nil
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("meminfo has no %s", field)
}
