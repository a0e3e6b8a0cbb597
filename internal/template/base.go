// Package template builds and caches forkbox's templates. The base template
// is a Debian bookworm root filesystem made with debootstrap from the host's
// configured Debian mirror, with the forkbox agent installed; it is built
// once, cached in the data dir and shared read-only by every sandbox.
package template

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/store"
)

// BaseID is the id of the base template.
const BaseID = "base"

// BaseAliases are extra names of the base template (none: the code
// interpreter has a template of its own).
var BaseAliases []string

// BasePackages are installed by debootstrap on top of its minbase variant:
// small packages whose dependencies debootstrap's simple resolver handles.
// procps (pgrep) and iproute2 (ss) are what the SDKs' ready checks call;
// attr gives setfattr/getfattr for the file metadata the files API exposes.
var BasePackages = []string{
	"python3", "bash", "coreutils", "procps", "ca-certificates", "curl", "git", "sudo",
	"iproute2", "less", "attr",
}

// BaseAptPackages are installed afterwards with the rootfs's own apt
// (--no-install-recommends): what E2B's base template (its
// templates/base/e2b.Dockerfile) gives users — python (-> python3) with pip,
// Node.js with npm, a C toolchain — from Debian's packages.
var BaseAptPackages = []string{"python-is-python3", "python3-pip", "nodejs", "npm", "build-essential"}

// baseVersion changes whenever the recipe below changes, so a cached rootfs
// built from an older recipe is rebuilt.
const baseVersion = "bookworm-3"

// Options configure EnsureBase.
type Options struct {
	// TemplateDir holds the templates (the base one in TemplateDir/base).
	TemplateDir string
	// Mirror is the Debian mirror URL; empty reads the host's apt sources.
	Mirror string
	// Suite is the Debian release (default bookworm).
	Suite string
	// AgentPath is the forkbox-agent binary to install into the rootfs.
	AgentPath string
	// Progress receives human-readable progress lines (may be nil).
	Progress io.Writer
	Logger   *slog.Logger
	// CodePrewarmJS starts the code interpreter's JavaScript kernel before
	// its template's image is taken (agent --code-prewarm-js).
	CodePrewarmJS bool
}

// AgentInRootFS is where the agent lives inside every template.
const AgentInRootFS = "/usr/local/bin/forkbox-agent"

// EnsureBase returns the base template, building its rootfs if it is not
// cached yet and refreshing the agent binary in it when that changed.
func EnsureBase(ctx context.Context, opts Options) (*store.Template, error) {
	fillDefaults(&opts)
	dir := filepath.Join(opts.TemplateDir, BaseID)
	rootfs := filepath.Join(dir, "rootfs")
	if err := buildLocked(ctx, dir, func() bool { return completeVersion(dir, baseVersion) },
		func() error { return buildBase(ctx, opts, dir) }); err != nil {
		return nil, err
	}
	changed, err := installAgent(opts.AgentPath, rootfs)
	if err != nil {
		return nil, err
	}
	if changed {
		progress(opts.Progress, "template base: installed agent %s", opts.AgentPath)
	}
	return &store.Template{
		ID: BaseID, Kind: store.KindTemplate, Aliases: BaseAliases, RootFS: rootfs,
		CPUCount: 2, MemoryMB: 512, DiskSizeMB: 1024, CreatedAt: time.Now().UTC(),
		Version: baseVersion,
	}, nil
}

func fillDefaults(o *Options) {
	if o.Suite == "" {
		o.Suite = "bookworm"
	}
	if o.Mirror == "" {
		o.Mirror = HostMirror()
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

// buildBase runs debootstrap into a scratch directory and renames it into
// place only when every step succeeded, so an interrupted build never leaves
// a half-made rootfs that looks usable.
func buildBase(ctx context.Context, opts Options, dir string) error {
	if _, err := exec.LookPath("debootstrap"); err != nil {
		return fmt.Errorf("debootstrap is not installed (apt-get install debootstrap): %w", errdefs.ErrUnavailable)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	scratch := filepath.Join(dir, "rootfs.building")
	os.RemoveAll(scratch)
	start := time.Now()
	progress(opts.Progress, "template base: building Debian %s rootfs from %s (first start only, a few minutes)", opts.Suite, opts.Mirror)
	args := []string{"--variant=minbase", "--include=" + strings.Join(BasePackages, ","), opts.Suite, scratch, opts.Mirror}
	if err := runLogged(ctx, opts.Progress, start, debootstrapLines(), "debootstrap", args...); err != nil {
		os.RemoveAll(scratch)
		return fmt.Errorf("debootstrap: %w", err)
	}
	progress(opts.Progress, "template base: installing %s", strings.Join(BaseAptPackages, " "))
	if err := installSlim(ctx, opts.Progress, start, scratch, BaseAptPackages...); err != nil {
		os.RemoveAll(scratch)
		return fmt.Errorf("base packages: %w", err)
	}
	progress(opts.Progress, "template base: configuring users and network files")
	if err := configure(ctx, scratch); err != nil {
		os.RemoveAll(scratch)
		return fmt.Errorf("configure rootfs: %w", err)
	}
	rootfs := filepath.Join(dir, "rootfs")
	os.RemoveAll(rootfs)
	if err := os.Rename(scratch, rootfs); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, ".complete"), []byte(baseVersion+"\n"), 0o644); err != nil {
		return err
	}
	progress(opts.Progress, "template base: ready in %s", time.Since(start).Round(time.Second))
	return nil
}

// configure adds what E2B clients assume of the base template: a user
// `user` (uid 1000) with passwordless sudo, a resolver, and /home/user.
func configure(ctx context.Context, root string) error {
	steps := [][]string{
		{"chroot", root, "useradd", "-m", "-u", "1000", "-s", "/bin/bash", "user"},
		{"chroot", root, "apt-get", "clean"},
	}
	for _, s := range steps {
		if out, err := exec.CommandContext(ctx, s[0], s[1:]...).CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %v: %s", strings.Join(s[2:], " "), err, out)
		}
	}
	files := map[string]string{
		"etc/sudoers.d/user": "user ALL=(ALL:ALL) NOPASSWD: ALL\n",
		"etc/hostname":       "forkbox\n",
		"etc/hosts":          "127.0.0.1 localhost forkbox\n::1 localhost\n",
	}
	if rc, err := os.ReadFile("/etc/resolv.conf"); err == nil {
		files["etc/resolv.conf"] = string(rc)
	}
	for name, content := range files {
		p := filepath.Join(root, name)
		os.Remove(p) // resolv.conf may be a dangling symlink
		mode := os.FileMode(0o644)
		if strings.HasPrefix(name, "etc/sudoers.d/") {
			mode = 0o440
		}
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			return err
		}
	}
	if err := tuneProfile(filepath.Join(root, "etc/profile")); err != nil {
		return err
	}
	return os.RemoveAll(filepath.Join(root, "var/lib/apt/lists"))
}

// slowUIDTest is Debian's /etc/profile test for root. Every login shell —
// and E2B clients run each command as `bash -l -c` — pays a fork of bash
// and an exec of id(1) for it: 28 ms of a 45 ms `bash -l -c 'echo hi'`
// measured in a gVisor sandbox here.
const slowUIDTest = `[ "$(id -u)" -eq 0 ]`

// tuneProfile makes /etc/profile ask the shell for the user id where the
// shell knows it (bash's EUID) and run id(1) only where it does not (dash).
func tuneProfile(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	fast := strings.ReplaceAll(string(b), slowUIDTest, `[ "${EUID:-$(id -u)}" -eq 0 ]`)
	return os.WriteFile(path, []byte(fast), 0o644)
}
