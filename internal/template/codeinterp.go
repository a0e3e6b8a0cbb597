package template

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/forkbox/forkbox/internal/store"
)

// CodeInterpreterID is the id of the template the E2B code-interpreter SDK
// uses by default. Its sandboxes serve the code interpreter on port 49999
// (forkbox-agent's --code-addr) with Python's data libraries installed.
const CodeInterpreterID = "code-interpreter-v1"

// CodeInterpreterPackages are installed on top of the base rootfs: the
// IPython kernel the interpreter runs cells in (Debian's ipykernel, which
// brings IPython, pyzmq and matplotlib's inline backend), Python's data
// libraries, R's kernel (IRkernel), metakernel (the base of the bash
// kernel) and the JDK whose jdk.jshell module runs Java cells.
var CodeInterpreterPackages = []string{
	"python3-ipykernel", "python3-matplotlib", "python3-pandas", "python3-numpy",
	"r-cran-irkernel", "python3-metakernel", "default-jdk-headless",
}

// CodeInterpreterNPM are installed globally with the base's npm after the
// packages: ijavascript is the JavaScript kernel (its zeromq module ships
// a prebuilt binary for Debian's Node.js, so nothing is downloaded from
// GitHub).
var CodeInterpreterNPM = []string{"ijavascript@5.2.1"}

// codeInterpreterVersion changes whenever this recipe (or the base it is
// derived from) changes, so a cached rootfs is rebuilt.
const codeInterpreterVersion = baseVersion + "+codeinterp-4"

// EnsureCodeInterpreter returns the code-interpreter template, building the
// base template first if needed, then its own rootfs (a copy of base's with
// CodeInterpreterPackages installed) if it is not cached yet, and
// refreshing the agent binary in it when that changed.
func EnsureCodeInterpreter(ctx context.Context, opts Options) (*store.Template, error) {
	fillDefaults(&opts)
	if _, err := EnsureBase(ctx, opts); err != nil {
		return nil, fmt.Errorf("base template: %w", err)
	}
	dir := filepath.Join(opts.TemplateDir, CodeInterpreterID)
	rootfs := filepath.Join(dir, "rootfs")
	if err := buildLocked(ctx, dir, func() bool { return completeVersion(dir, codeInterpreterVersion) },
		func() error { return buildCodeInterpreter(ctx, opts, dir) }); err != nil {
		return nil, err
	}
	changed, err := installAgent(opts.AgentPath, rootfs)
	if err != nil {
		return nil, err
	}
	if changed {
		progress(opts.Progress, "template %s: installed agent %s", CodeInterpreterID, opts.AgentPath)
	}
	args := []string{AgentInRootFS, "--code-prewarm"}
	if opts.CodePrewarmJS {
		args = append(args, "--code-prewarm-js")
	}
	return &store.Template{
		ID: CodeInterpreterID, Kind: store.KindTemplate, RootFS: rootfs,
		CPUCount: 2, MemoryMB: 1024, DiskSizeMB: 2048, CreatedAt: time.Now().UTC(),
		Version: codeInterpreterVersion,
		// The interpreter is started before the template's image is taken,
		// so a new sandbox's first runCode finds it running.
		AgentArgs:  args,
		ReadyPorts: []int{49999},
	}, nil
}

// completeVersion reports whether dir holds a finished build of version.
func completeVersion(dir, version string) bool {
	b, err := os.ReadFile(filepath.Join(dir, ".complete"))
	return err == nil && strings.TrimSpace(string(b)) == version
}

// buildCodeInterpreter copies the base rootfs into a scratch directory,
// installs the packages there with the rootfs's own apt (from the mirror
// base was bootstrapped from) and renames it into place only when every
// step succeeded.
func buildCodeInterpreter(ctx context.Context, opts Options, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	scratch := filepath.Join(dir, "rootfs.building")
	os.RemoveAll(scratch)
	start := time.Now()
	name := "template " + CodeInterpreterID
	progress(opts.Progress, "%s: deriving from base and installing %s (first start only, a few minutes)",
		name, strings.Join(CodeInterpreterPackages, " "))
	steps := []func() error{
		func() error { return copyTree(ctx, filepath.Join(opts.TemplateDir, BaseID, "rootfs"), scratch) },
		func() error {
			return withProc(ctx, scratch, func() error {
				return installPackages(ctx, opts.Progress, start, scratch, CodeInterpreterPackages...)
			})
		},
		func() error { return installNPM(ctx, opts.Progress, start, scratch) },
		func() error { return warmPython(ctx, scratch) },
		func() error { return cleanApt(ctx, scratch) },
	}
	for _, step := range steps {
		if err := step(); err != nil {
			os.RemoveAll(scratch)
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	rootfs := filepath.Join(dir, "rootfs")
	os.RemoveAll(rootfs)
	if err := os.Rename(scratch, rootfs); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, ".complete"), []byte(codeInterpreterVersion+"\n"), 0o644); err != nil {
		return err
	}
	progress(opts.Progress, "%s: ready in %s", name, time.Since(start).Round(time.Second))
	return nil
}

// copyTree copies src to dst preserving everything (sharing extents where
// the filesystem can).
func copyTree(ctx context.Context, src, dst string) error {
	if out, err := exec.CommandContext(ctx, "cp", "-a", "--reflink=auto", src, dst).CombinedOutput(); err != nil {
		return fmt.Errorf("copy base rootfs: %v: %s", err, out)
	}
	return nil
}

// installPackages runs apt-get install --no-install-recommends of pkgs
// inside the rootfs. The rootfs's resolver configuration is refreshed from
// the host's so its apt reaches the mirror.
func installPackages(ctx context.Context, w io.Writer, start time.Time, root string, pkgs ...string) error {
	if rc, err := os.ReadFile("/etc/resolv.conf"); err == nil {
		p := filepath.Join(root, "etc/resolv.conf")
		os.Remove(p)
		if err := os.WriteFile(p, rc, 0o644); err != nil {
			return err
		}
	}
	// Snapshot mirrors serve Release files past their Valid-Until date.
	aptOpts := []string{"-o", "Acquire::Check-Valid-Until=false", "-o", "Acquire::Check-Date=false"}
	update := append([]string{root, "apt-get"}, append(aptOpts, "update")...)
	if err := runApt(ctx, w, start, update...); err != nil {
		return fmt.Errorf("apt-get update: %w", err)
	}
	install := append([]string{root, "env", "DEBIAN_FRONTEND=noninteractive", "apt-get"}, aptOpts...)
	install = append(install, "install", "-y", "--no-install-recommends")
	install = append(install, pkgs...)
	if err := runApt(ctx, w, start, install...); err != nil {
		return fmt.Errorf("apt-get install: %w", err)
	}
	return nil
}

// warmPython imports the libraries once as the sandbox user, so the
// font cache matplotlib builds on first use is already in the template.
func warmPython(ctx context.Context, root string) error {
	cmd := exec.CommandContext(ctx, "chroot", "--userspec=1000:1000", root,
		"env", "HOME=/home/user", "MPLBACKEND=Agg", "python3", "-c",
		"import ipykernel.kernelapp, matplotlib.pyplot, pandas, numpy; matplotlib.pyplot.plot([1]); matplotlib.pyplot.savefig('/dev/null', format='png')")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("warm python libraries: %v: %s", err, lastLines(string(out), 10))
	}
	return nil
}

// cleanApt drops apt's caches; sandboxes run apt-get update themselves.
func cleanApt(ctx context.Context, root string) error {
	if out, err := exec.CommandContext(ctx, "chroot", root, "apt-get", "clean").CombinedOutput(); err != nil {
		return fmt.Errorf("apt-get clean: %v: %s", err, out)
	}
	lists := filepath.Join(root, "var/lib/apt/lists")
	entries, err := os.ReadDir(lists)
	if err != nil {
		return nil
	}
	for _, e := range entries {
		if e.Name() != "partial" && e.Name() != "lock" {
			os.RemoveAll(filepath.Join(lists, e.Name()))
		}
	}
	return nil
}

// runApt runs chroot with args, turning apt's "Setting up" lines into
// progress so the build visibly moves.
func runApt(ctx context.Context, w io.Writer, start time.Time, args ...string) error {
	return runLogged(ctx, w, start, func(line string) (string, bool) {
		show := strings.HasPrefix(line, "Setting up ") || strings.HasPrefix(line, "Reading package lists... Done")
		return "apt: " + line, show
	}, "chroot", args...)
}
