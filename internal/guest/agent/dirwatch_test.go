package agent

import (
	"os"
	"path/filepath"
	"testing"
)

// TestDirWatch: a stamp is computed once and remembered until something in
// its directories changes, however the change is made; a stamp with a
// symlink, or of a directory on another filesystem than the watch's root,
// is never remembered; reset forgets everything.
func TestDirWatch(t *testing.T) {
	write := func(p, s string) func(t *testing.T) {
		return func(t *testing.T) {
			if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	tests := []struct {
		name   string
		change func(dir string) func(t *testing.T)
	}{
		{"rewritten", func(dir string) func(*testing.T) { return write(filepath.Join(dir, "profile"), "b\n") }},
		{"appended to", func(dir string) func(*testing.T) {
			return func(t *testing.T) {
				f, err := os.OpenFile(filepath.Join(dir, "profile"), os.O_APPEND|os.O_WRONLY, 0)
				if err != nil {
					t.Fatal(err)
				}
				f.WriteString("more\n")
				f.Close()
			}
		}},
		{"replaced by a rename", func(dir string) func(*testing.T) {
			return func(t *testing.T) {
				write(filepath.Join(dir, "new"), "c\n")(t)
				if err := os.Rename(filepath.Join(dir, "new"), filepath.Join(dir, "profile")); err != nil {
					t.Fatal(err)
				}
			}
		}},
		{"mode changed", func(dir string) func(*testing.T) {
			return func(t *testing.T) {
				if err := os.Chmod(filepath.Join(dir, "profile"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
		}},
		{"a missing subdirectory created", func(dir string) func(*testing.T) {
			return func(t *testing.T) {
				if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
					t.Fatal(err)
				}
			}
		}},
		{"a file in a watched subdirectory", func(dir string) func(*testing.T) {
			return write(filepath.Join(dir, "d", "x.sh"), "x\n")
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			write(filepath.Join(dir, "profile"), "a\n")(t)
			if err := os.Mkdir(filepath.Join(dir, "d"), 0o755); err != nil {
				t.Fatal(err)
			}
			w := &dirWatch{fd: -1, root: dir}
			defer w.reset()
			calls := 0
			dirs := []stampDir{{dir, []string{"profile", "sub", "d"}}, {filepath.Join(dir, "d"), nil}, {filepath.Join(dir, "sub"), nil}}
			stamp := func() string {
				return w.stamp("k", dirs, func() (string, bool) {
					calls++
					return stampFiles(filepath.Join(dir, "profile"), filepath.Join(dir, "sub"))
				})
			}
			before := stamp()
			if stamp(); calls != 1 {
				t.Fatalf("computed %d times with nothing changed, want 1", calls)
			}
			tt.change(dir)(t)
			after := stamp()
			if calls != 2 {
				t.Fatalf("computed %d times after the change, want 2", calls)
			}
			if tt.name != "a file in a watched subdirectory" && after == before {
				t.Errorf("stamp unchanged after the change: %q", after)
			}
			if stamp(); calls != 2 {
				t.Errorf("computed %d times after a quiet call, want 2", calls)
			}
			w.reset()
			if stamp(); calls != 3 {
				t.Errorf("computed %d times after reset, want 3", calls)
			}
		})
	}
}

// TestDirWatchOtherNames: files a stamp does not depend on come and go in
// its directories (a command writing its output in the home) and the stamp
// is not computed again.
func TestDirWatchOtherNames(t *testing.T) {
	dir := t.TempDir()
	w := &dirWatch{fd: -1, root: dir}
	defer w.reset()
	calls := 0
	stamp := func() {
		w.stamp("k", []stampDir{{dir, []string{"profile"}}}, func() (string, bool) {
			calls++
			return stampFiles(filepath.Join(dir, "profile"))
		})
	}
	stamp()
	for _, step := range []func() error{
		func() error { return os.WriteFile(filepath.Join(dir, "out.txt"), []byte("x"), 0o644) },
		func() error { return os.Rename(filepath.Join(dir, "out.txt"), filepath.Join(dir, "out2.txt")) },
		func() error { return os.Mkdir(filepath.Join(dir, "work"), 0o755) },
		func() error { return os.Remove(filepath.Join(dir, "out2.txt")) },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
		stamp()
	}
	if calls != 1 {
		t.Errorf("computed %d times while only other names changed, want 1", calls)
	}
	if err := os.WriteFile(filepath.Join(dir, "profile"), []byte("p"), 0o644); err != nil {
		t.Fatal(err)
	}
	if stamp(); calls != 2 {
		t.Errorf("computed %d times after the watched name changed, want 2", calls)
	}
}

// TestDirWatchNotRemembered: a stamp that reports a symlink, one whose
// directory is missing with no watched parent, and one of a directory on
// another filesystem than the root are computed on every call.
func TestDirWatchNotRemembered(t *testing.T) {
	dir := t.TempDir()
	if err := os.Symlink("/etc/hostname", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		root  string
		dirs  []stampDir
		paths []string
	}{
		{"symlink", dir, []stampDir{{dir, nil}}, []string{filepath.Join(dir, "link")}},
		{"missing, parent unwatched", dir, []stampDir{{filepath.Join(dir, "no", "such"), nil}}, nil},
		{"missing, parent watched for other names", dir, []stampDir{{dir, []string{"link"}}, {filepath.Join(dir, "no"), nil}}, nil},
		{"another filesystem", "/proc", []stampDir{{dir, nil}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := &dirWatch{fd: -1, root: tt.root}
			defer w.reset()
			calls := 0
			for range 3 {
				w.stamp("k", tt.dirs, func() (string, bool) {
					calls++
					return stampFiles(tt.paths...)
				})
			}
			if calls != 3 {
				t.Errorf("computed %d times in 3 calls, want 3", calls)
			}
		})
	}
}
