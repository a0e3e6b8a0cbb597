package agent

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// metrics is the body of GET /metrics (names as in envd.yaml).
type metrics struct {
	Timestamp  int64   `json:"ts"`
	CPUCount   int     `json:"cpu_count"`
	CPUUsedPct float64 `json:"cpu_used_pct"`
	MemTotal   uint64  `json:"mem_total"`
	MemUsed    uint64  `json:"mem_used"`
	// MemCache is the page cache (/proc/meminfo Cached), what E2B's
	// SandboxMetric reports as memCache.
	MemCache  uint64 `json:"mem_cache"`
	DiskUsed  uint64 `json:"disk_used"`
	DiskTotal uint64 `json:"disk_total"`
}

// cpuSample is a reading of /proc/stat's aggregate cpu line.
type cpuSample struct {
	busy, total uint64
}

// cpuTracker remembers the previous /proc/stat reading, so CPU use is
// reported over the interval between two /metrics calls.
type cpuTracker struct {
	mu   sync.Mutex
	last cpuSample // guarded by mu
}

// usage returns the busy percentage since the previous call.
func (c *cpuTracker) usage(cur cpuSample) float64 {
	c.mu.Lock()
	prev := c.last
	c.last = cur
	c.mu.Unlock()
	if cur.total <= prev.total {
		return 0
	}
	return float64(cur.busy-prev.busy) / float64(cur.total-prev.total) * 100
}

// sampleMetrics reads CPU, memory and root disk usage.
func (a *Agent) sampleMetrics() (metrics, error) {
	m := metrics{Timestamp: time.Now().Unix(), CPUCount: runtime.NumCPU()}
	total, avail, cached, err := readMeminfo()
	if err != nil {
		return m, err
	}
	m.MemTotal, m.MemUsed, m.MemCache = total, total-min(avail, total), cached
	var st syscall.Statfs_t
	if err := syscall.Statfs("/", &st); err != nil {
		return m, fmt.Errorf("statfs /: %w", err)
	}
	m.DiskTotal = st.Blocks * uint64(st.Bsize)
	m.DiskUsed = (st.Blocks - st.Bfree) * uint64(st.Bsize)
	if cur, err := readCPU(); err == nil {
		m.CPUUsedPct = a.cpu.usage(cur)
	}
	return m, nil
}

// readMeminfo returns MemTotal, MemAvailable and Cached in bytes.
func readMeminfo() (total, avail, cached uint64, err error) {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, 0, 0, err
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			continue
		}
		v, _ := strconv.ParseUint(f[1], 10, 64)
		switch f[0] {
		case "MemTotal:":
			total = v * 1024
		case "MemAvailable:":
			avail = v * 1024
		case "Cached:":
			cached = v * 1024
		}
	}
	return total, avail, cached, nil
}

// readCPU reads the aggregate jiffies from /proc/stat; idle and iowait
// count as not busy.
func readCPU() (cpuSample, error) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuSample{}, err
	}
	line, _, _ := bytes.Cut(data, []byte("\n"))
	f := strings.Fields(string(line))
	if len(f) < 5 || f[0] != "cpu" {
		return cpuSample{}, fmt.Errorf("unexpected /proc/stat format")
	}
	var s cpuSample
	// user nice system idle iowait irq softirq steal; guest time is
	// already included in user and nice.
	for i, field := range f[1:min(len(f), 9)] {
		v, _ := strconv.ParseUint(field, 10, 64)
		s.total += v
		if i != 3 && i != 4 { // idle, iowait
			s.busy += v
		}
	}
	return s, nil
}
