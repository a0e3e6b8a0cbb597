package hostmm

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// fakeSysfs writes the two settings as Linux shows them. What Enable
// writes (a bare value) reads back as selected.
func fakeSysfs(t *testing.T, shmem, defrag string) string {
	t.Helper()
	dir := t.TempDir()
	write := func(name, choices, sel string) {
		out := ""
		for _, c := range filepath.SplitList(choices) {
			if c == sel {
				c = "[" + c + "]"
			}
			if out != "" {
				out += " "
			}
			out += c
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(out+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("shmem_enabled", "always:within_size:advise:never:deny:force", shmem)
	write("defrag", "always:defer:defer+madvise:madvise:never", defrag)
	return dir
}

func TestEnable(t *testing.T) {
	for _, tc := range []struct {
		shmem, defrag string
		want          Settings
		changes       int
	}{
		{"never", "madvise", Settings{"advise", "defer"}, 2}, // Debian's defaults
		{"never", "defer+madvise", Settings{"advise", "defer"}, 2},
		{"never", "always", Settings{"advise", "always"}, 1},
		{"advise", "madvise", Settings{"advise", "defer"}, 1},
		{"advise", "never", Settings{"advise", "never"}, 0},
		{"always", "madvise", Settings{"always", "madvise"}, 0}, // runsc uses huge pages already
		{"within_size", "madvise", Settings{"within_size", "madvise"}, 0},
		{"deny", "madvise", Settings{"deny", "madvise"}, 0}, // an administrator's off
	} {
		dir := fakeSysfs(t, tc.shmem, tc.defrag)
		changes, err := Enable(dir)
		if err != nil {
			t.Fatalf("%s/%s: %v", tc.shmem, tc.defrag, err)
		}
		if len(changes) != tc.changes {
			t.Errorf("%s/%s: %d changes %v, want %d", tc.shmem, tc.defrag, len(changes), changes, tc.changes)
		}
		got, err := Read(dir)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s/%s: now %v, want %v", tc.shmem, tc.defrag, got, tc.want)
		}
		if tc.shmem != "deny" && !got.HugePagesForGVisor() {
			t.Errorf("%s/%s: %v still keeps runsc off huge pages", tc.shmem, tc.defrag, got)
		}
	}
}

func TestReadRejectsUnselected(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "shmem_enabled"), []byte("always never\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "defrag"), []byte("[madvise]\n"), 0o644)
	if _, err := Read(dir); err == nil {
		t.Fatal("Read accepted a setting with no selected value")
	}
}

// TestMemInfoMiB: this host's meminfo has both fields the daemon reads,
// available never above total; an unknown field is an error.
func TestMemInfoMiB(t *testing.T) {
	total, err := MemInfoMiB("MemTotal")
	if err != nil || total <= 0 {
		t.Fatalf("MemTotal: %d %v", total, err)
	}
	if avail, err := MemInfoMiB("MemAvailable"); err != nil || avail <= 0 || avail > total {
		t.Errorf("MemAvailable: %d %v (total %d)", avail, err, total)
	}
	if _, err := MemInfoMiB("NoSuchField"); err == nil {
		t.Error("an unknown field read without an error")
	}
}
