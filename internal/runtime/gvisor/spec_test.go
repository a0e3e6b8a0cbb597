package gvisor

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"

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
		wantHost   int64 // MiB, raiseMemoryLimit's
	}{
		{"full rootfs", []string{"proc", "dev", "sys", "tmp"}, runtime.Resources{CPUCount: 2, MemoryMB: 512, PidsMax: 100},
			[]string{"/proc", "/dev", "/sys"}, 512, 200000, 556, 512 + 128 + 128 + 50},
		{"missing mount points are skipped", []string{"proc"}, runtime.Resources{CPUCount: 1, MemoryMB: 64, PidsMax: 10, DiskMB: 100},
			[]string{"/proc"}, 64, 100000, 286, 64 + 16 + 128 + 5 + 200},
		{"sized /tmp", []string{"tmp"}, runtime.Resources{CPUCount: 1, MemoryMB: 64, PidsMax: 10, DiskMB: 100},
			[]string{"/tmp"}, 64, 100000, 286, 64 + 16 + 128 + 5 + 200},
		// A template whose build wrote into /tmp keeps those files: its /tmp
		// is the (sized) root overlay's, not a tmpfs over them.
		{"/tmp with files is not covered", []string{"tmp", "tmp/builder"}, runtime.Resources{CPUCount: 1, MemoryMB: 64, PidsMax: 10, DiskMB: 100},
			nil, 64, 100000, 286, 64 + 16 + 128 + 5 + 200},
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
			if got := memoryLimit(tt.res) / mib; got != tt.wantHost {
				t.Errorf("host memory limit = %d MiB, want %d", got, tt.wantHost)
			}
			checkSized(t, s, tt.res)
			if s.Linux.Namespaces[0].Path != lease.NSPath || s.Linux.CgroupsPath != "/p/x" {
				t.Errorf("namespaces %v cgroups %q", s.Linux.Namespaces, s.Linux.CgroupsPath)
			}
			if !hasEnv(s.Process.Env, "PATH") || !slices.Contains(s.Process.Env, "A=1") || s.Process.Terminal {
				t.Errorf("process %+v", s.Process)
			}
		})
	}
}

// checkSized checks the limits met inside: RLIMIT_NPROC = PidsMax, and
// with DiskMB the root overlay and /tmp sized to it.
func checkSized(t *testing.T, s *specs.Spec, res runtime.Resources) {
	t.Helper()
	if !slices.ContainsFunc(s.Process.Rlimits, func(l specs.POSIXRlimit) bool {
		return l.Type == "RLIMIT_NPROC" && l.Soft == uint64(res.PidsMax) && l.Hard == uint64(res.PidsMax+agentTasks)
	}) {
		t.Errorf("rlimits %+v: want RLIMIT_NPROC = %d", s.Process.Rlimits, res.PidsMax)
	}
	want := ""
	if res.DiskMB > 0 {
		want = fmt.Sprintf("size=%dm", res.DiskMB)
	}
	if got := s.Annotations["dev.gvisor.spec.rootfs.options"]; got != want {
		t.Errorf("rootfs options = %q, want %q", got, want)
	}
	for _, m := range s.Mounts {
		if m.Destination == "/tmp" && !slices.Contains(m.Options, want) {
			t.Errorf("/tmp options %v, want %q", m.Options, want)
		}
	}
}
