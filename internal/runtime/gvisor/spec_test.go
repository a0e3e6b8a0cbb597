package gvisor

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/forkbox/forkbox/internal/netns"
	"github.com/forkbox/forkbox/internal/runtime"
)

func TestBuildSpec(t *testing.T) {
	tests := []struct {
		name       string
		dirs       []string
		res        runtime.Resources
		wantMounts []string
		wantMemMiB int64
		wantQuota  int64
		wantPids   int64
	}{
		{"full rootfs", []string{"proc", "dev", "sys"}, runtime.Resources{CPUCount: 2, MemoryMB: 512, PidsMax: 100},
			[]string{"/proc", "/dev", "/sys"}, 512 + 128 + 128, 200000, 328},
		{"missing mount points are skipped", []string{"proc"}, runtime.Resources{CPUCount: 1, MemoryMB: 64, PidsMax: 10},
			[]string{"/proc"}, 64 + 16 + 128, 100000, 148},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			for _, d := range tt.dirs {
				if err := os.Mkdir(filepath.Join(root, d), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			lease := netns.Lease{NSPath: "/var/run/netns/x"}
			s := buildSpec(runtime.Spec{ID: "x", RootFS: root, Args: []string{"a"}, Env: []string{"A=1"}}, tt.res, lease, "/p/x")
			var got []string
			for _, m := range s.Mounts {
				got = append(got, m.Destination)
			}
			if !slices.Equal(got, tt.wantMounts) {
				t.Errorf("mounts = %v, want %v", got, tt.wantMounts)
			}
			lr := s.Linux.Resources
			if *lr.Memory.Limit != tt.wantMemMiB*mib || *lr.CPU.Quota != tt.wantQuota || lr.Pids.Limit != tt.wantPids {
				t.Errorf("resources mem=%d quota=%d pids=%d", *lr.Memory.Limit/mib, *lr.CPU.Quota, lr.Pids.Limit)
			}
			if s.Linux.Namespaces[0].Path != lease.NSPath || s.Linux.CgroupsPath != "/p/x" {
				t.Errorf("namespaces %v cgroups %q", s.Linux.Namespaces, s.Linux.CgroupsPath)
			}
			if !hasEnv(s.Process.Env, "PATH") || !slices.Contains(s.Process.Env, "A=1") || s.Process.Terminal {
				t.Errorf("process %+v", s.Process)
			}
		})
	}
}
