package gvisor

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
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
			[]string{"/proc", "/dev", "/sys", x11Dir}, 512, 200000, 556, 512 + 128 + 128 + 50},
		{"missing mount points are skipped", []string{"proc"}, runtime.Resources{CPUCount: 1, MemoryMB: 64, PidsMax: 10, DiskMB: 100},
			[]string{"/proc"}, 64, 100000, 286, 64 + 16 + 128 + 5 + 100},
		// /tmp is the sized root overlay's: the mount below it keeps
		// runsc's own tmpfs off it, whether it is empty or not.
		{"/tmp in the root overlay", []string{"tmp"}, runtime.Resources{CPUCount: 1, MemoryMB: 64, PidsMax: 10, DiskMB: 100},
			[]string{x11Dir}, 64, 100000, 286, 64 + 16 + 128 + 5 + 100},
		{"/tmp with files", []string{"tmp", "tmp/builder"}, runtime.Resources{CPUCount: 1, MemoryMB: 64, PidsMax: 10, DiskMB: 100},
			[]string{x11Dir}, 64, 100000, 286, 64 + 16 + 128 + 5 + 100},
		// Something of the rootfs's own there: it is not hidden (and /tmp
		// is not empty).
		{"X11 directory with files", []string{"tmp", "tmp/.X11-unix", "tmp/.X11-unix/X0"}, runtime.Resources{CPUCount: 2, MemoryMB: 64, PidsMax: 10},
			nil, 64, 200000, 286, 64 + 16 + 128 + 5},
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
			s := buildSpec(runtime.Spec{ID: "x", RootFS: root, Args: []string{"a"}, Env: []string{"A=1"}}, tt.res, lease, "/p/x", "", "/v/x")
			var got []string
			for _, m := range s.Mounts {
				got = append(got, m.Destination)
			}
			// Every sandbox has the volume mount, volumes or not.
			if want := append(slices.Clone(tt.wantMounts), runtime.VolumeRoot); !slices.Equal(got, want) {
				t.Errorf("mounts = %v, want %v", got, want)
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
		if m.Destination == "/tmp" {
			t.Errorf("a /tmp mount %+v: /tmp is the root overlay's", m)
		}
	}
}

// A 1-CPU sandbox is pinned to one host CPU, taken in turn among those
// sandboxes' cgroups may use (filled in above them first, as the kernel
// requires of a child naming CPUs); others run on all.
func TestPinCPUs(t *testing.T) {
	parent := "forkbox-test-pin"
	dir := filepath.Join(cgroupRoot, "cpuset", parent)
	t.Cleanup(func() { os.Remove(dir) })
	r := &Runtime{cfg: Config{CgroupParent: parent}, log: slog.Default()}
	root, err := os.ReadFile(filepath.Join(cgroupRoot, "cpuset", "cpuset.cpus"))
	if err != nil {
		t.Fatal(err)
	}
	cpus, err := parseCPUList(strings.TrimSpace(string(root)))
	if err != nil || len(cpus) == 0 {
		t.Fatalf("host cpus %q: %v", root, err)
	}
	for i := range 2 * len(cpus) {
		if got, want := r.pinCPUs(runtime.Resources{CPUCount: 1}), fmt.Sprint(cpus[i%len(cpus)]); got != want {
			t.Errorf("pin %d = %q, want %q", i, got, want)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "cpuset.cpus")); strings.TrimSpace(string(b)) != strings.TrimSpace(string(root)) {
		t.Errorf("the parent's cpuset.cpus is %q, want the root's %q", b, root)
	}
	if got := r.pinCPUs(runtime.Resources{CPUCount: 2}); got != "" {
		t.Errorf("a 2-CPU sandbox is pinned to %q", got)
	}
	s := buildSpec(runtime.Spec{ID: "x", RootFS: t.TempDir(), Args: []string{"a"}}, runtime.Resources{CPUCount: 1, MemoryMB: 64, PidsMax: 10},
		netns.Lease{}, "/p/x", "1", "/v/x")
	if s.Linux.Resources.CPU.Cpus != "1" {
		t.Errorf("cpuset %q, want 1", s.Linux.Resources.CPU.Cpus)
	}
}

func TestParseCPUList(t *testing.T) {
	for in, want := range map[string][]int{"0": {0}, "0-1": {0, 1}, "0-2,7,9-10": {0, 1, 2, 7, 9, 10}} {
		if got, err := parseCPUList(in); err != nil || !slices.Equal(got, want) {
			t.Errorf("parseCPUList(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := parseCPUList("x"); err == nil {
		t.Error("parseCPUList(x) succeeded")
	}
}
