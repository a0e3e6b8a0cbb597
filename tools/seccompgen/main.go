// Command seccompgen precompiles the seccomp-bpf programs of the pinned
// runsc and writes the Go files and the `go build -overlay` file that put
// them into the runsc build.
//
// Why: a `go build` of runsc from the module proxy ships no precompiled
// programs (upstream generates them in its Bazel build), so every sandbox
// start and every restore compiles the sentry's filter at run time: 0.1 to
// 0.3 s of CPU per restore measured here, which a clone ×10 pays ten times
// on two cores. The programs are gVisor's own, produced by gVisor's exported
// precompile functions; only the file that registers them is written here.
//
// Usage: seccompgen -gvisor-dir DIR (a writable copy of the pinned gvisor
// module; scripts/build-runsc.sh makes it and builds runsc from it).
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"gvisor.dev/gvisor/pkg/seccomp/precompiledseccomp"
	bootcfg "gvisor.dev/gvisor/runsc/boot/filter/config"
	gofercfg "gvisor.dev/gvisor/runsc/fsgofer/filter/config"
)

// registries are the runsc packages whose filter_precompiled.go the
// overlay replaces, each with the programs it registers.
var registries = []struct {
	dir      string // package directory inside the gvisor module
	programs func() ([]precompiledseccomp.Program, error)
	keep     func(name string) bool
}{
	{"runsc/boot/filter", bootcfg.PrecompiledPrograms, sentryProgramWanted},
	{"runsc/fsgofer/filter", gofercfg.PrecompiledPrograms, func(string) bool { return true }},
}

func main() {
	gvisorDir := flag.String("gvisor-dir", "", "a writable copy of the gvisor module whose filter_precompiled.go files are replaced")
	flag.Parse()
	if *gvisorDir == "" {
		log.Fatal("seccompgen: -gvisor-dir is required")
	}
	for _, reg := range registries {
		if err := generate(*gvisorDir, reg.dir, reg.programs, reg.keep); err != nil {
			log.Fatalf("seccompgen: %s: %v", reg.dir, err)
		}
	}
}

// generate replaces dir/filter_precompiled.go in the gvisor copy with one
// that registers the kept programs.
func generate(gvisorDir, dir string, programs func() ([]precompiledseccomp.Program, error), keep func(string) bool) error {
	start := time.Now()
	all, err := programs()
	if err != nil {
		return err
	}
	var kept []precompiledseccomp.Program
	for _, p := range all {
		if keep(p.Name) {
			kept = append(kept, p)
		}
	}
	if len(kept) == 0 {
		return fmt.Errorf("none of %d programs kept", len(all))
	}
	path := filepath.Join(gvisorDir, dir, "filter_precompiled.go")
	if _, err := os.Stat(path); err != nil {
		return err // the file to replace must exist: a gvisor that moved it needs a look
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, render(kept), 0o644); err != nil {
		return err
	}
	fmt.Printf("seccompgen: %s: %d of %d programs (%s)\n", dir, len(kept), len(all), time.Since(start).Round(time.Second))
	return os.Rename(tmp, path)
}
