// Package deptest lets a package's tests state which packages it must never
// depend on, in the style of Tailscale's tstest/deptest: the layering of
// forkbox (server → sandbox → runtime / images / store) is checked by
// `go test`, not only by review.
package deptest

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// DepChecker checks the dependencies of one package.
type DepChecker struct {
	// Pkg is the package to check, as `go list` takes it; "" means the
	// package in the test's working directory (the package under test).
	Pkg string
	// BadDeps maps import paths the package must not depend on, directly or
	// through another package, to the reason. Test-only imports are not
	// dependencies.
	BadDeps map[string]string
	// BadImports maps import paths the package must not import itself
	// (a layer below may) to the reason.
	BadImports map[string]string
}

// Check fails t for every bad dependency of the package.
func (c DepChecker) Check(t testing.TB) {
	t.Helper()
	deps, err := c.deps()
	if err != nil {
		t.Fatal(err)
	}
	imports, err := c.imports()
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range c.violations(deps, imports) {
		t.Error(v)
	}
}

// deps lists the package's transitive dependencies (and itself).
func (c DepChecker) deps() ([]string, error) { return c.list("{{.ImportPath}}", "-deps") }

// imports lists the package's own imports.
func (c DepChecker) imports() ([]string, error) { return c.list(`{{join .Imports "\n"}}`) }

// list runs go list on the package with a -f template.
func (c DepChecker) list(format string, flags ...string) ([]string, error) {
	pkg := c.Pkg
	if pkg == "" {
		pkg = "."
	}
	args := append(append([]string{"list"}, flags...), "-f", format, pkg)
	out, err := exec.Command("go", args...).Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return nil, &listError{pkg: pkg, stderr: string(ee.Stderr), err: err}
		}
		return nil, err
	}
	return strings.Fields(string(out)), nil
}

// violations describes each bad dependency found in deps and each bad
// import in imports, sorted.
func (c DepChecker) violations(deps, imports []string) []string {
	var out []string
	for _, d := range deps {
		if why, bad := c.BadDeps[d]; bad {
			out = append(out, "bad dependency "+d+": "+why)
		}
	}
	for _, d := range imports {
		if why, bad := c.BadImports[d]; bad {
			out = append(out, "bad import "+d+": "+why)
		}
	}
	slices.Sort(out)
	return out
}

type listError struct {
	pkg, stderr string
	err         error
}

// Error implements error.
func (e *listError) Error() string {
	return "go list " + e.pkg + ": " + e.err.Error() + ": " + e.stderr
}

// Unwrap returns go list's exit error.
func (e *listError) Unwrap() error { return e.err }
