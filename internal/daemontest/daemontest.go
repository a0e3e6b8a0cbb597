// Package daemontest starts a real forkbox daemon (the built binary, real
// runsc) for integration and end-to-end tests and benchmarks. A missing
// prerequisite fails the test loudly: CI runs as root where runsc works, so a
// skipped runtime test would be an unchecked claim.
package daemontest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Daemon is a running `forkbox serve` process.
type Daemon struct {
	URL     string // http://127.0.0.1:PORT
	APIKey  string
	DataDir string
	Bin     string // directory of forkbox, forkbox-agent, runsc

	t       testing.TB
	args    []string
	env     []string
	cmd     *exec.Cmd
	logMu   sync.Mutex
	logFile *os.File
	exited  chan struct{}
}

// Options tune Start.
type Options struct {
	// DataDir is reused when set (restart tests); a temp dir otherwise.
	DataDir string
	// ExtraArgs are appended to `forkbox serve`.
	ExtraArgs []string
	// Env adds variables to the daemon's environment (e.g. FORKBOX_FAULTS).
	Env []string
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
	d := &Daemon{t: t, Bin: BinDir(t), DataDir: o.DataDir, env: o.Env}
	if d.DataDir == "" {
		d.DataDir = t.TempDir()
	}
	port := freePort(t)
	d.URL = fmt.Sprintf("http://127.0.0.1:%d", port)
	d.args = append([]string{"serve",
		"--listen", fmt.Sprintf("127.0.0.1:%d", port),
		"--data-dir", d.DataDir,
		"--template-dir", TemplateDir(t),
		"--runsc", filepath.Join(d.Bin, "runsc"),
		"--agent", filepath.Join(d.Bin, "forkbox-agent"),
		// Its own subnet and names: daemons of concurrent test packages (or
		// a developer's daemon) must not remove each other's networks.
		"--network-index", fmt.Sprint(networkIndex()),
		"--sweep-interval", "200ms",
		// No pool unless a test asks for one (ExtraArgs come later and win):
		// pooled sandboxes would show up in the host-state checks.
		"--pool-size", "0",
	}, o.ExtraArgs...)
	d.start()
	t.Cleanup(d.Stop)
	return d
}

// networkIndex picks a network index for this test process: distinct per
// process so daemons of test packages run in parallel do not collide.
func networkIndex() int { return 1 + os.Getpid()%40 }

func freePort(t testing.TB) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func (d *Daemon) start() {
	t := d.t
	logPath := filepath.Join(d.DataDir, "daemon.log")
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	d.logFile = f
	d.cmd = exec.Command(filepath.Join(d.Bin, "forkbox"), d.args...)
	d.cmd.Env = append(os.Environ(), d.env...)
	d.cmd.Stdout, d.cmd.Stderr = f, f
	// Its own process group, so a test can kill -9 the daemon alone.
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	d.exited = make(chan struct{})
	go func() { d.cmd.Wait(); close(d.exited) }()
	d.waitReady(90 * time.Second)
	key, err := os.ReadFile(filepath.Join(d.DataDir, "api-key"))
	if err != nil {
		t.Fatalf("daemontest: api key: %v\n%s", err, d.Log())
	}
	d.APIKey = strings.TrimSpace(string(key))
}

func (d *Daemon) waitReady(limit time.Duration) {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		select {
		case <-d.exited:
			d.t.Fatalf("daemontest: daemon exited at start:\n%s", d.Log())
		default:
		}
		resp, err := http.Get(d.URL + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	d.t.Fatalf("daemontest: daemon not ready after %s:\n%s", limit, d.Log())
}

// Log returns what the daemon printed so far.
func (d *Daemon) Log() string {
	b, _ := os.ReadFile(filepath.Join(d.DataDir, "daemon.log"))
	return string(b)
}

// Kill9 kills the daemon with SIGKILL (sandboxes keep running) and waits.
func (d *Daemon) Kill9() {
	d.cmd.Process.Signal(syscall.SIGKILL)
	<-d.exited
}

// Restart starts the daemon again on the same address and data dir.
func (d *Daemon) Restart() {
	d.start()
}

// Stop terminates the daemon gracefully and then removes every sandbox it
// left, so tests leave nothing behind on the host.
func (d *Daemon) Stop() {
	if d.cmd == nil || d.cmd.Process == nil {
		return
	}
	select {
	case <-d.exited:
	default:
		d.KillAll()
		d.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-d.exited:
		case <-time.After(10 * time.Second):
			d.cmd.Process.Kill()
			<-d.exited
		}
	}
	d.logFile.Close()
	unmountUnder(d.DataDir)
	if d.t.Failed() {
		d.t.Logf("daemon log:\n%s", d.Log())
	}
}

// KillAll kills every sandbox the daemon knows (running or paused).
func (d *Daemon) KillAll() {
	for _, id := range d.SandboxIDs() {
		d.Do(http.MethodDelete, "/sandboxes/"+id, nil)
	}
}

// SandboxIDs lists the ids of every live sandbox.
func (d *Daemon) SandboxIDs() []string {
	resp, err := d.Do(http.MethodGet, "/v2/sandboxes?state=running,paused&limit=100", nil)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	var list []struct {
		SandboxID string `json:"sandboxID"`
	}
	json.NewDecoder(resp.Body).Decode(&list)
	ids := make([]string, 0, len(list))
	for _, s := range list {
		ids = append(ids, s.SandboxID)
	}
	return ids
}

// Do sends an authenticated control-API request.
func (d *Daemon) Do(method, path string, body io.Reader) (*http.Response, error) {
	req, err := http.NewRequest(method, d.URL+path, body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("X-API-Key", d.APIKey)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return http.DefaultClient.Do(req)
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

// unmountUnder lazily unmounts everything mounted below dir (runsc keeps a
// bind mount of a null network namespace in its state directory), so the
// test's temporary directory can be removed.
func unmountUnder(dir string) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && strings.HasPrefix(f[4], dir+"/") {
			syscall.Unmount(f[4], syscall.MNT_DETACH)
		}
	}
}
