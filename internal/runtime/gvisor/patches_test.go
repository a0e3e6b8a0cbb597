package gvisor

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// TestGvisorPatchTests runs the gVisor-level tests that come with
// patches/gvisor (patches/gvisor/testdata, laid out like the gVisor tree) on
// a copy of the pinned gVisor module: first unpatched, where they must fail
// (each guards a fault the pinned gVisor has), then with every patch
// applied the way scripts/build-runsc.sh applies them, where they must pass.
func TestGvisorPatchTests(t *testing.T) {
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	tests := filepath.Join(root, "patches/gvisor/testdata")
	pkgs := patchTestPackages(t, tests)
	if len(pkgs) == 0 {
		t.Fatalf("no gVisor-level tests under %s", tests)
	}
	src := filepath.Join(t.TempDir(), "gvisor")
	copyModule(t, root, src)
	if err := os.CopyFS(src, os.DirFS(tests)); err != nil {
		t.Fatal(err)
	}
	if out, err := goTest(src, pkgs); err == nil {
		t.Fatalf("the patch tests pass on the unpatched gVisor: they cannot catch what they guard\n%s", out)
	}
	patches, _ := filepath.Glob(filepath.Join(root, "patches/gvisor/*.patch"))
	sort.Strings(patches)
	for _, p := range patches {
		cmd := exec.Command("patch", "-p1", "--batch", "--forward", "--quiet", "-d", src, "-i", p)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("patch %s: %v\n%s", filepath.Base(p), err, out)
		}
	}
	if out, err := goTest(src, pkgs); err != nil {
		t.Fatalf("the patch tests fail on the patched gVisor: %v\n%s", err, out)
	}
}

// patchTestPackages lists the directories under dir holding Go test files,
// as package patterns relative to the gVisor module's root.
func patchTestPackages(t *testing.T, dir string) []string {
	seen := map[string]bool{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, "_test.go") {
			return err
		}
		rel, err := filepath.Rel(dir, filepath.Dir(p))
		seen["./"+filepath.ToSlash(rel)] = err == nil
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	var pkgs []string
	for p := range seen {
		pkgs = append(pkgs, p)
	}
	sort.Strings(pkgs)
	return pkgs
}

// copyModule copies the gVisor module pinned in root's go.mod to dst,
// writable (the module cache is read-only and Go will not build it with
// changed files in place).
func copyModule(t *testing.T, root, dst string) {
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "gvisor.dev/gvisor")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil || len(strings.TrimSpace(string(out))) == 0 {
		t.Fatalf("locating the pinned gVisor module: %v (run go mod download)", err)
	}
	// CopyFS makes the copies writable (0666 plus the source's execute bits).
	if err := os.CopyFS(dst, os.DirFS(strings.TrimSpace(string(out)))); err != nil {
		t.Fatalf("copying gVisor: %v", err)
	}
}

// goTest runs the forkbox tests of pkgs in the gVisor copy at dir.
func goTest(dir string, pkgs []string) ([]byte, error) {
	cmd := exec.Command("go", append([]string{"test", "-count=1", "-run", "Forkbox", "-timeout", "2m"}, pkgs...)...)
	cmd.Dir = dir
	return cmd.CombinedOutput()
}
