// Package daemontest starts a real forkbox daemon (the built binary, real
// runsc) for integration and end-to-end tests: a testing wrapper over
// internal/daemonproc that fails the test where that returns an error. A
// missing prerequisite fails the test loudly: CI runs as root where runsc
// works, so a skipped runtime test would be an unchecked claim.
package daemontest

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/forkbox/forkbox/internal/daemon"
	"github.com/forkbox/forkbox/internal/daemon/daemonproc"
)

// Daemon is a running `forkbox serve` process.
type Daemon struct {
	URL     string // http://127.0.0.1:PORT
	APIKey  string
	DataDir string
	Bin     string // directory of forkbox, forkbox-agent, runsc

	t       testing.TB
	p       *daemonproc.Proc
	strict  bool
	stopped sync.Once
}

// Options tune Start.
type Options struct {
	// DataDir is reused when set (restart tests); a temp dir otherwise.
	DataDir string
	// ExtraArgs are appended to `forkbox serve`.
	ExtraArgs []string
	// Env adds variables to the daemon's environment (e.g. FORKBOX_FAULTS).
	Env []string
	// StrictStop fails the test when Stop finds anything wrong (a sandbox
	// that did not die, a daemon that needed SIGKILL, runsc containers it
	// left running) instead of only logging it.
	StrictStop bool
}

// RepoRoot walks up from the working directory to the directory of go.mod.
func RepoRoot(t testing.TB) string {
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("daemontest: go.mod not found above the working directory")
		}
		dir = parent
	}
}

// BinDir returns the directory holding the built binaries: $FORKBOX_BIN or
// <repo>/bin. It fails the test if a binary is missing.
func BinDir(t testing.TB) string {
	bin := os.Getenv("FORKBOX_BIN")
	if bin == "" {
		bin = filepath.Join(RepoRoot(t), "bin")
	}
	for _, name := range []string{"forkbox", "forkbox-agent", "runsc"} {
		if _, err := os.Stat(filepath.Join(bin, name)); err != nil {
			t.Fatalf("daemontest: %s missing in %s (run `make build`): %v", name, bin, err)
		}
	}
	return bin
}

// TemplateDir returns the shared, cached template directory: building the
// base rootfs takes minutes, so tests share the one `make template` built.
func TemplateDir(t testing.TB) string {
	dir := os.Getenv("FORKBOX_TEMPLATE_DIR")
	if dir == "" {
		dir = "/var/lib/forkbox/templates"
	}
	if _, err := os.Stat(filepath.Join(dir, "base", ".complete")); err != nil {
		t.Fatalf("daemontest: no base template in %s (run `make template`): %v", dir, err)
	}
	return dir
}

// Start runs a daemon on a free loopback port and waits until it serves.
func Start(t testing.TB, o Options) *Daemon {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("daemontest: must run as root (runsc, namespaces, nftables)")
	}
	d := &Daemon{t: t, Bin: BinDir(t), DataDir: o.DataDir, strict: o.StrictStop}
	if d.DataDir == "" {
		d.DataDir = t.TempDir()
	}
	p, err := daemonproc.Start(context.Background(), daemonproc.Options{
		Bin:         d.Bin,
		DataDir:     d.DataDir,
		TemplateDir: TemplateDir(t),
		Args: append([]string{
			// Its own subnet and names: daemons of concurrent test packages
			// (or a developer's daemon) must not remove each other's networks.
			"--network-index", fmt.Sprint(networkIndex()),
			"--sweep-interval", "200ms",
			// No pool unless a test asks for one (ExtraArgs come later and
			// win): pooled sandboxes would show up in the host-state checks.
			"--pool-size", "0",
		}, o.ExtraArgs...),
		Env:          o.Env,
		ReadyTimeout: 90 * time.Second,
		StopTimeout:  10 * time.Second,
		// Its own process group, so a test can kill -9 the daemon alone.
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
	})
	if err != nil {
		t.Fatalf("daemontest: %v\n%s", err, readLog(d.DataDir))
	}
	d.p, d.URL, d.APIKey = p, p.URL, p.APIKey
	live.Add(1)
	t.Cleanup(d.Stop)
	return d
}

// live counts this process's running test daemons (they share a network
// index, hence a firewall table).
var live atomic.Int32

// NetNSPrefix is the prefix of the network namespaces of this test
// process's daemons; the container id follows it.
func NetNSPrefix() string { return daemon.NetNSPrefix(networkIndex()) }

// NetworkIndex is the --network-index of this test process's daemons: it
// names their firewall table (forkbox<N>), links (fb<N>h<slot>) and
// namespaces (NetNSPrefix).
func NetworkIndex() int { return networkIndex() }

// readLog returns <dataDir>/daemon.log, where daemonproc writes the log.
func readLog(dataDir string) string {
	b, _ := os.ReadFile(filepath.Join(dataDir, "daemon.log"))
	return string(b)
}

// Log returns what the daemon printed so far.
func (d *Daemon) Log() string { return d.p.Log() }

// Pid is the daemon's process id; Cmdline its program and arguments.
func (d *Daemon) Pid() int { return d.p.Pid() }

// Cmdline is the daemon's program and arguments (to start a rival on the
// same data dir, say).
func (d *Daemon) Cmdline() []string { return d.p.Cmdline() }

// Kill9 kills the daemon with SIGKILL (sandboxes keep running) and waits.
func (d *Daemon) Kill9() { d.p.Kill9() }

// Terminate stops the daemon with SIGTERM, as an operator does, leaving
// its sandboxes running; a daemon that needs SIGKILL fails the test.
func (d *Daemon) Terminate() {
	d.t.Helper()
	if err := d.p.Terminate(); err != nil {
		d.t.Errorf("daemontest: %v", err)
	}
}

// Restart starts the daemon again on the same address and data dir.
func (d *Daemon) Restart() {
	d.t.Helper()
	if err := d.p.Restart(context.Background()); err != nil {
		d.t.Fatalf("daemontest: %v\n%s", err, d.Log())
	}
	d.APIKey = d.p.APIKey
}

// Stop terminates the daemon gracefully and then removes every sandbox it
// left, so tests leave nothing behind on the host: KillAll, SIGTERM (SIGKILL
// after 10 s) and one lazy unmount of each mount point below the data dir
// (runsc's null-netns bind mount), so the test's temporary directory can be
// removed.
func (d *Daemon) Stop() { d.stopped.Do(d.stop) }

func (d *Daemon) stop() {
	if err := d.p.Stop(context.Background()); err != nil && d.strict {
		d.t.Errorf("daemontest: stop: %v", err)
	} else if err != nil {
		d.t.Logf("daemontest: stop: %v", err)
	}
	if live.Add(-1) == 0 {
		// The daemon keeps its firewall table across restarts on purpose
		// (sandboxes stay isolated while it is down). Once this process's
		// last test daemon is gone nothing needs it: do not let test runs
		// pile tables up on the host.
		exec.Command("nft", "delete", "table", "inet", fmt.Sprintf("forkbox%d", networkIndex())).Run()
	}
	if d.t.Failed() {
		d.t.Logf("daemon log:\n%s", d.Log())
	}
}

// KillAll kills every sandbox the daemon knows (running or paused).
func (d *Daemon) KillAll() { d.p.KillAll(context.Background()) }

// SandboxIDs lists the ids of every live sandbox (nil if the daemon does
// not answer).
func (d *Daemon) SandboxIDs() []string {
	ids, _ := d.p.SandboxIDs(context.Background())
	return ids
}

// Do sends an authenticated control-API request.
func (d *Daemon) Do(method, path string, body io.Reader) (*http.Response, error) {
	return d.p.Do(context.Background(), method, path, body)
}

// Env returns the environment an unmodified E2B client needs.
func (d *Daemon) Env() []string {
	return append(os.Environ(),
		"E2B_API_URL="+d.URL, "E2B_SANDBOX_URL="+d.URL, "E2B_API_KEY="+d.APIKey,
		"E2B_DOMAIN=", "FORKBOX_API_URL="+d.URL, "FORKBOX_API_KEY="+d.APIKey,
		// novita-sandbox, E2B's fork, reads its own variable names.
		"NOVITA_API_URL="+d.URL, "NOVITA_SANDBOX_URL="+d.URL, "NOVITA_API_KEY="+d.APIKey,
	)
}

// Scan reports whether the daemon log contains s (for log assertions).
func (d *Daemon) Scan(s string) bool {
	sc := bufio.NewScanner(strings.NewReader(d.Log()))
	for sc.Scan() {
		if strings.Contains(sc.Text(), s) {
			return true
		}
	}
	return false
}

// Context returns a context bounded by the test's deadline minus a margin.
func Context(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	t.Cleanup(cancel)
	return ctx
}
