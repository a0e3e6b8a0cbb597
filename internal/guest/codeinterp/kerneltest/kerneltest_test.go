package kerneltest

import (
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/forkbox/forkbox/internal/guest/codeinterp"
)

// TestKernelConformance checks every kernel the server starts, TypeScript's
// included, against Debian's Jupyter protocol test suite on the host, with
// the host's Debian packages (the template's come from the same Debian
// release; TestKernelConformanceInTemplate in test/e2e runs the suite in a
// sandbox against the template's own).
func TestKernelConformance(t *testing.T) {
	py := "/usr/bin/python3" // Debian's, where python3-jupyter-kernel-test is
	if out, err := exec.Command(py, "-c", "import jupyter_kernel_test, metakernel, ipykernel").CombinedOutput(); err != nil {
		t.Fatalf("python3-jupyter-kernel-test, python3-metakernel and python3-ipykernel are required (scripts/deps.sh installs them): %v\n%s", err, out)
	}
	dir := t.TempDir()
	files, err := Files(codeinterp.Config{Python: py}, dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteFiles(dir, files); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(py, "-m", "unittest", "-v", Module)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), Env(dir)...)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	t.Logf("kernel conformance (%s):\n%s", time.Since(start).Round(time.Millisecond), out)
	if err != nil {
		t.Fatalf("kernel conformance suite failed: %v", err)
	}
	if err := Check(string(out)); err != nil {
		t.Fatal(err)
	}
}
