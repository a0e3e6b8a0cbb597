package oomguard

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// fakeProc writes a procfs with meminfo and the given pids' statm
// (resident pages) and comm.
func fakeProc(t *testing.T, totalKB, freeKB, shmemKB int, rss map[int]int) string {
	t.Helper()
	dir := t.TempDir()
	mi := fmt.Sprintf("MemTotal:       %d kB\nMemFree:        %d kB\nMemAvailable:   %d kB\nShmem:          %d kB\n",
		totalKB, freeKB, freeKB, shmemKB)
	if err := os.WriteFile(filepath.Join(dir, "meminfo"), []byte(mi), 0o644); err != nil {
		t.Fatal(err)
	}
	for pid, pages := range rss {
		d := filepath.Join(dir, strconv.Itoa(pid))
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(d, "statm"), fmt.Appendf(nil, "%d %d 0 0 0 0 0\n", pages*2, pages), 0o644)
		os.WriteFile(filepath.Join(d, "comm"), []byte("p"+strconv.Itoa(pid)+"\n"), 0o644)
	}
	return dir
}

func TestCheck(t *testing.T) {
	// pid 1 (the agent's place) and this process are never victims,
	// however large.
	rss := map[int]int{1: 1 << 28, os.Getpid(): 1 << 28, 40: 100, 41: 100000, 42: 5000}
	tests := []struct {
		name     string
		freeKB   int
		shmemKB  int
		wantKill int
		wantNext time.Duration
	}{
		{"plenty", 400 << 10, 0, 0, slowEvery},
		{"getting short: look more often", 100 << 10, 0, 0, fastEvery},
		{"exhausted: the largest goes", 1 << 10, 0, 41, settle},
		{"files fill memory: no process to blame", 1 << 10, 300 << 10, 0, slowEvery},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			proc := fakeProc(t, 512<<10, tt.freeKB, tt.shmemKB, rss)
			killed := 0
			got := Check(Options{Proc: proc, Kill: func(pid int) error { killed = pid; return nil }})
			if got != tt.wantNext || killed != tt.wantKill {
				t.Errorf("Check = next in %v, killed %d; want %v, %d", got, killed, tt.wantNext, tt.wantKill)
			}
		})
	}
}
