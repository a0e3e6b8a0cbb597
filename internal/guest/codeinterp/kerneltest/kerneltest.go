// Package kerneltest runs the Jupyter protocol conformance suite (Debian's
// python3-jupyter-kernel-test) against the code interpreter's kernels,
// started with the command lines the server uses (codeinterp.KernelSpecs):
// on the host with its Debian packages, or inside a code-interpreter
// sandbox against the kernels installed in the template.
package kerneltest

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strconv"

	"github.com/forkbox/forkbox/internal/guest/codeinterp"
)

// suite is the conformance suite's test classes, one per kernel.
//
//go:embed kernel_conformance.py
var suite []byte

// typescriptSamples are the TypeScript kernel's samples as users write
// them; Files transpiles them as the server would.
//
//go:embed typescript_samples.json
var typescriptSamples []byte

// Module is the suite's Python module, run with `python3 -m unittest -v`.
const Module = "kernel_conformance"

// Files returns every file the suite needs except Python libraries, as
// paths relative to dir (where they will be on the machine that runs the
// suite): the kernelspecs, the suite and the transpiled TypeScript
// samples.
func Files(cfg codeinterp.Config, dir string) (map[string][]byte, error) {
	files, err := codeinterp.KernelSpecs(cfg, dir)
	if err != nil {
		return nil, err
	}
	var samples map[string]string
	if err := json.Unmarshal(typescriptSamples, &samples); err != nil {
		return nil, fmt.Errorf("typescript samples: %w", err)
	}
	for name, ts := range samples {
		if samples[name], err = codeinterp.TranspileTypeScript(ts); err != nil {
			return nil, fmt.Errorf("typescript sample %s: %w", name, err)
		}
	}
	b, _ := json.Marshal(samples)
	files["typescript_samples.json"] = b
	files[Module+".py"] = suite
	return files, nil
}

// Env is the environment the suite runs with, its files being in dir:
// the kernelspecs are found there, kernels write their connection files
// under it, and HostLibraries, when brought along, are in dir/lib.
func Env(dir string) []string {
	return []string{
		"JUPYTER_PATH=" + dir, "JUPYTER_RUNTIME_DIR=" + path.Join(dir, "runtime"), "PYTHONPATH=" + path.Join(dir, "lib"),
		"FORKBOX_TS_SAMPLES=" + path.Join(dir, "typescript_samples.json"), "PYTHONDONTWRITEBYTECODE=1",
	}
}

// WriteFiles writes files (relative paths) under dir.
func WriteFiles(dir string, files map[string][]byte) error {
	for rel, b := range files {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// hostLibraries are what the suite imports beyond the template's Python
// packages: Debian's python3-jupyter-kernel-test and its jsonschema (with
// pyrsistent), in the host's dist-packages.
var hostLibraries = []string{
	"jupyter_kernel_test", "jsonschema", "jsonschema-4.10.3.dist-info", "pyrsistent",
	"_pyrsistent_version.py", "pvectorc.cpython-311-x86_64-linux-gnu.so",
}

// HostLibraries returns the suite's own Python packages from the host's
// Debian dist-packages, as paths under "lib/" (for PYTHONPATH), to bring
// them into a sandbox whose template lacks them. They are test tools and
// pure Python (pyrsistent's C helper is optional); the template's Python
// is the same Debian release's.
func HostLibraries() (map[string][]byte, error) {
	const root = "/usr/lib/python3/dist-packages"
	files := map[string][]byte{}
	for _, name := range hostLibraries {
		err := filepath.WalkDir(filepath.Join(root, name), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if d.Name() == "__pycache__" {
					return filepath.SkipDir
				}
				return nil
			}
			rel, _ := filepath.Rel(root, p)
			b, err := os.ReadFile(p)
			files[path.Join("lib", filepath.ToSlash(rel))] = b
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("host library %s (python3-jupyter-kernel-test installed?): %w", name, err)
		}
	}
	return files, nil
}

// ran matches unittest's summary line.
var ran = regexp.MustCompile(`(?m)^Ran (\d+) tests? in `)

// classes are the suite's test classes, one per kernel; each must have run.
var classes = []string{"Python", "JavaScript", "TypeScript", "R", "Bash", "Java"}

// Check reads the suite's verbose output: it must have run tests of every
// kernel, skipped none that were expected and ended OK.
func Check(out string) error {
	m := ran.FindStringSubmatch(out)
	if m == nil {
		return fmt.Errorf("no unittest summary in the output")
	}
	if n, _ := strconv.Atoi(m[1]); n == 0 {
		return fmt.Errorf("the conformance suite ran no test")
	}
	for _, c := range classes {
		if !regexp.MustCompile(`\(` + Module + `\.` + c + `\.test_\w+\) \.\.\. ok`).MatchString(out) {
			return fmt.Errorf("no passing test of the %s kernel", c)
		}
	}
	if !regexp.MustCompile(`(?m)^OK\b`).MatchString(out) {
		return fmt.Errorf("the conformance suite failed")
	}
	return nil
}
