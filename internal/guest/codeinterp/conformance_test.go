package codeinterp

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestKernelConformance checks every kernel the server starts against
// Debian's Jupyter protocol test suite (python3-jupyter-kernel-test), run
// on the host with the template's Debian packages. Each kernel's
// kernelspec is made from its kernelSpec, so the suite starts exactly the
// command line the server does.
func TestKernelConformance(t *testing.T) {
	py := testPython(t)
	if out, err := exec.Command(py, "-c", "import jupyter_kernel_test, metakernel").CombinedOutput(); err != nil {
		t.Fatalf("python3-jupyter-kernel-test and python3-metakernel are required (scripts/deps.sh installs them): %v\n%s", err, out)
	}
	s := New(Config{Python: py})
	root := t.TempDir()
	for lang, spec := range kernelSpecs {
		if lang == langTypeScript {
			continue // ijavascript again, behind a transform of the server's
		}
		writeKernelSpec(t, s, filepath.Join(root, "kernels", "forkbox-"+lang), spec)
	}
	cmd := exec.Command(py, "-m", "unittest", "-v", "kernel_conformance")
	cmd.Dir = "testdata"
	cmd.Env = append(os.Environ(), "JUPYTER_PATH="+root, "JUPYTER_RUNTIME_DIR="+filepath.Join(root, "runtime"),
		"PYTHONDONTWRITEBYTECODE=1")
	start := time.Now()
	out, err := cmd.CombinedOutput()
	t.Logf("kernel conformance (%s):\n%s", time.Since(start).Round(time.Millisecond), out)
	if err != nil {
		t.Fatalf("kernel conformance suite failed: %v", err)
	}
	if strings.Contains(string(out), "Ran 0 tests") {
		t.Fatal("the conformance suite ran no test")
	}
}

// writeKernelSpec writes dir/kernel.json for spec, with its helper files
// beside it.
func writeKernelSpec(t *testing.T, s *Server, dir string, spec *kernelSpec) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	placeholder := filepath.Join(dir, "connection.json")
	argv, err := spec.argv(s, placeholder)
	if err != nil {
		t.Fatal(err)
	}
	for i, a := range argv {
		argv[i] = strings.ReplaceAll(a, placeholder, "{connection_file}")
	}
	env := map[string]string{}
	vars := spec.env
	if spec.argvEnv != nil {
		vars = append(append([]string(nil), vars...), spec.argvEnv(s)...)
	}
	for _, kv := range vars {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	b, _ := json.Marshal(map[string]any{"argv": argv, "display_name": spec.name, "language": spec.name, "env": env})
	if err := os.WriteFile(filepath.Join(dir, "kernel.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}
