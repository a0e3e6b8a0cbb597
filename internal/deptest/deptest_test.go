package deptest

import (
	"strings"
	"testing"
)

// TestCatchesPlantedImport runs the checker on a package that imports
// runtime/gvisor (testdata/badimport), directly and as a transitive
// dependency, and on a package that does not.
func TestCatchesPlantedImport(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    DepChecker
		want int
	}{
		{"direct", DepChecker{Pkg: "./testdata/badimport", BadDeps: map[string]string{
			"github.com/forkbox/forkbox/internal/runtime/gvisor": "planted",
		}}, 1},
		{"transitive", DepChecker{Pkg: "./testdata/badimport", BadDeps: map[string]string{
			"github.com/forkbox/forkbox/internal/netns": "gvisor imports it",
		}}, 1},
		{"direct import", DepChecker{Pkg: "./testdata/badimport", BadImports: map[string]string{
			"github.com/forkbox/forkbox/internal/runtime/gvisor": "planted",
			"github.com/forkbox/forkbox/internal/netns":          "only gvisor imports it",
		}}, 1},
		{"clean", DepChecker{Pkg: "github.com/forkbox/forkbox/internal/errdefs", BadDeps: map[string]string{
			"github.com/forkbox/forkbox/internal/runtime/gvisor": "never",
		}}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			deps, err := tc.c.deps()
			if err != nil {
				t.Fatal(err)
			}
			imports, err := tc.c.imports()
			if err != nil {
				t.Fatal(err)
			}
			v := tc.c.violations(deps, imports)
			if len(v) != tc.want {
				t.Fatalf("violations = %q, want %d", v, tc.want)
			}
			for _, s := range v {
				if !strings.HasPrefix(s, "bad dependency ") && !strings.HasPrefix(s, "bad import ") {
					t.Errorf("violation %q", s)
				}
			}
		})
	}
}
