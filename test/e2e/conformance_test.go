package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/forkbox/forkbox/client"
	"github.com/forkbox/forkbox/internal/guest/codeinterp"
	"github.com/forkbox/forkbox/internal/guest/codeinterp/kerneltest"
)

// TestKernelConformanceInTemplate runs the Jupyter protocol conformance
// suite (Debian's python3-jupyter-kernel-test) inside a code-interpreter
// sandbox, against the kernels as the template installs them (IPython,
// IRkernel, ijavascript for JavaScript and TypeScript, the bash and Java
// kernels on the template's JDK), started with the command lines the
// sandbox's interpreter uses. The suite itself and its jsonschema are not
// in the template; they are copied from the host's Debian packages.
func TestKernelConformanceInTemplate(t *testing.T) {
	ctx, _, sb := codeInterpreterSandbox(t, 10*time.Minute)
	const dir = "/tmp/forkbox-conformance"
	// The template's paths: ijavascript is npm's global install there.
	files, err := kerneltest.Files(codeinterp.Config{IJavaScript: "/usr/local/bin/ijskernel"}, dir)
	if err != nil {
		t.Fatal(err)
	}
	libs, err := kerneltest.HostLibraries()
	if err != nil {
		t.Fatal(err)
	}
	conn := sb.Conn()
	for _, set := range []map[string][]byte{files, libs} {
		for rel, b := range set {
			if err := conn.WriteFile(ctx, dir+"/"+rel, b); err != nil {
				t.Fatalf("upload %s: %v", rel, err)
			}
		}
	}
	env := map[string]string{}
	for _, kv := range kerneltest.Env(dir) {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	var out strings.Builder
	start := time.Now()
	code, err := conn.Exec(ctx, client.ExecOptions{
		Cmd: []string{"python3", "-m", "unittest", "-v", kerneltest.Module}, Cwd: dir, Env: env, Stdout: &out, Stderr: &out,
	})
	t.Logf("kernel conformance in the template (%s):\n%s", time.Since(start).Round(time.Millisecond), out.String())
	if err != nil || code != 0 {
		t.Fatalf("the suite exited %d (%v)", code, err)
	}
	if err := kerneltest.Check(out.String()); err != nil {
		t.Fatal(err)
	}
}
