package agent

import (
	"os"
	"path/filepath"
	"testing"
)

func TestQuietProcs(t *testing.T) {
	proc := func(pids ...string) string {
		dir := t.TempDir()
		for _, p := range append(pids, "self", "meminfo") {
			if err := os.Mkdir(filepath.Join(dir, p), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	for _, tt := range []struct {
		name string
		pids []string
		idle map[int]bool
		want bool
	}{
		{"the agent alone", []string{"1"}, nil, true},
		{"the agent and an idle pooled shell", []string{"1", "7"}, map[int]bool{7: true}, true},
		{"a command runs", []string{"1", "7", "9"}, map[int]bool{7: true}, false},
		{"a pooled shell was taken", []string{"1", "7"}, nil, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := quietProcs(proc(tt.pids...), 1, tt.idle); got != tt.want {
				t.Errorf("quietProcs = %v, want %v", got, tt.want)
			}
		})
	}
	if quietProcs(filepath.Join(t.TempDir(), "missing"), 1, nil) {
		t.Error("an unreadable procfs is quiet")
	}
}
