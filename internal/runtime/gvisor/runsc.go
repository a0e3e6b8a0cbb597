package gvisor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/forkbox/forkbox/internal/errdefs"
)

// Platform is the runsc platform: KVM crawls on the PVM hosts forkbox was
// measured on (design.md §1), so systrap. The runsc build precompiles its
// seccomp programs for this platform only (tools/seccompgen).
const Platform = "systrap"

// Flags names the global runsc flags images are written with: a template
// image is only reused by a runtime with the same flags.
// "sized-fs" marks the per-sandbox file sizes of limits.go: images made
// before them have other mounts, which a restore refuses; "-3": /tmp is
// the root overlay's (x11Mount), the agent holds CAP_SYS_RESOURCE and a
// 1-CPU sandbox's image has one CPU.
//
// "vol-1": every sandbox has the volume mount (volumes.go).
//
// "small-pages": --app-huge-pages=false (Config.AppHugePages; FlagsFor).
const Flags = "systrap,sandbox,overlay2=root:memory,allow-suid,sized-fs-3,vol-1,small-pages"

// FlagsFor is Flags of a runtime whose Config.AppHugePages is hugePages.
func FlagsFor(hugePages bool) string {
	if hugePages {
		return strings.Replace(Flags, "small-pages", "app-huge-pages", 1)
	}
	return Flags
}

// globalArgs are the runsc flags every invocation shares. They must be the
// same for every command on a container (runsc reads its state with them).
func (r *Runtime) globalArgs() []string {
	args := []string{
		"--root=" + r.runscRoot(),
		"--platform=" + Platform,
		"--network=sandbox",
		"--overlay2=root:memory",
		// sudo (and every setuid binary) is silently powerless without it;
		// E2B clients expect `sudo` to work for the default user.
		"--allow-suid",
		// Small pages for the sandbox's own memory unless asked: with huge
		// pages every 2 MiB region a process touches at all is committed
		// whole (a Go heap's, a bash's), which is most of an idle sandbox.
		fmt.Sprintf("--app-huge-pages=%t", r.cfg.AppHugePages),
		// The sentry's stderr, where Go writes a crash report, goes to a
		// file per container (runsc names it by %ID%), which Wait reads to
		// tell a crash from a kill.
		"--panic-log=" + filepath.Join(r.panicDir(), "%ID%.log"),
	}
	if r.onDemand {
		args = append(args, onDemandFlag)
	}
	if r.holdGC {
		args = append(args, holdGCFlag)
	}
	if !r.cfg.SystrapFastPath {
		args = append(args, "--systrap-disable-fast-path")
	}
	if r.cfg.PortableImages {
		args = append(args, "--restore-spec-validation=warning")
	}
	if r.cfg.PanicSignal != 0 {
		args = append(args, fmt.Sprintf("--panic-signal=%d", r.cfg.PanicSignal))
	}
	if r.cfg.DebugLogDir != "" {
		args = append(args, "--debug", "--debug-log="+r.cfg.DebugLogDir+"/")
	}
	return args
}

// run executes a short runsc command that does not hand its stdio to a
// sandbox, and returns its stdout.
func (r *Runtime) run(ctx context.Context, timeout time.Duration, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, r.cfg.RunscPath, append(r.globalArgs(), args...)...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// A runsc child (the sandbox) may inherit the pipes; never wait for
	// their EOF longer than this.
	cmd.WaitDelay = time.Second
	start := time.Now()
	err := cmd.Run()
	r.log.DebugContext(ctx, "runsc", "args", args, "took", time.Since(start), "err", err)
	if err != nil {
		return stdout.Bytes(), runscError(ctx, args, err, stderr.String())
	}
	return stdout.Bytes(), nil
}

// runDetached executes a runsc command whose stdio becomes the sandbox's
// (create, restore). The sandbox gets /dev/null: a pipe nobody drains would
// block the sandbox (trap 1), its read end dies with the daemon, and regular
// files break after restore (trap 4). runsc's own errors go to logPath.
func (r *Runtime) runDetached(ctx context.Context, timeout time.Duration, logPath string, args ...string) error {
	// Only the timeout stops these commands, not the caller's cancellation
	// (a request gone, a daemon shutting down): a create or restore killed
	// half way leaves a sandbox runsc has no state for. The cleanup after a
	// failure can then delete a whole container.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", os.DevNull, err)
	}
	defer null.Close()
	full := append(r.globalArgs(), "--log="+logPath)
	cmd := exec.CommandContext(ctx, r.cfg.RunscPath, append(full, args...)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = null, null, null
	cmd.WaitDelay = time.Second
	start := time.Now()
	err = cmd.Run()
	r.log.DebugContext(ctx, "runsc", "args", args, "took", time.Since(start), "err", err)
	if err != nil {
		return runscError(ctx, args, err, lastError(logPath))
	}
	return nil
}

// runscError wraps a failed runsc command with its class: a deadline is
// ErrUnavailable, a missing container ErrNotFound, everything else internal.
func runscError(ctx context.Context, args []string, err error, stderr string) error {
	msg := strings.TrimSpace(stderr)
	verb := args[0]
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("runsc %s: %v (%s): %w", verb, ctx.Err(), msg, errdefs.ErrUnavailable)
	case strings.Contains(msg, "restore spec validation"):
		// The image names host paths (its root filesystem's, its mounts')
		// that are not where this restore found them.
		return fmt.Errorf("runsc %s: the image was made where its root filesystem or a mount had another host path "+
			"(a template dir or data dir copied or moved since?): %s: %w", verb, msg, errdefs.ErrInternal)
	case strings.Contains(msg, "does not exist") || strings.Contains(msg, "no such container"):
		return fmt.Errorf("runsc %s: %s: %w", verb, msg, errdefs.ErrNotFound)
	case strings.Contains(msg, "is not running") || strings.Contains(msg, "cannot be paused") ||
		strings.Contains(msg, "not paused") || strings.Contains(msg, "invalid state"):
		return fmt.Errorf("runsc %s: %s: %w", verb, msg, errdefs.ErrConflict)
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return fmt.Errorf("runsc %s: exit %d: %s: %w", verb, exit.ExitCode(), msg, errdefs.ErrInternal)
	}
	return fmt.Errorf("runsc %s: %v: %w", verb, err, errdefs.ErrInternal)
}

// lastError returns the last error lines of a runsc --log file.
func lastError(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, "FATAL ERROR") || strings.Contains(line, `"level":"error"`) {
			out = append(out, line)
		}
	}
	if len(out) > 3 {
		out = out[len(out)-3:]
	}
	return strings.Join(out, "; ")
}
