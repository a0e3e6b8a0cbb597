// Package e2e runs forkbox end to end: a real daemon (the built binary, real
// runsc) driven by the unmodified npm E2B clients and by Go checks of what a
// client alone cannot see (host-side network namespaces).
//
// Prerequisites (as for every runtime test): root, `make build`,
// `make template`, and `make deps` for test/e2e/js/node_modules. A missing
// prerequisite fails the test; nothing here is skipped.
package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/forkbox/forkbox/internal/daemon/daemonproc"
	"github.com/forkbox/forkbox/internal/daemon/daemontest"
)

// jsTimeout bounds one JS test file (node's own per-test timeouts are 60 s).
const jsTimeout = 15 * time.Minute

// jsDir returns test/e2e/js and fails unless its npm dependencies are installed.
func jsDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(daemontest.RepoRoot(t), "test", "e2e", "js")
	b, err := os.ReadFile(filepath.Join(dir, "package.json"))
	if err != nil {
		t.Fatal(err)
	}
	var pkg struct {
		Dependencies map[string]string `json:"dependencies"`
	}
	if err := json.Unmarshal(b, &pkg); err != nil {
		t.Fatalf("e2e: %s/package.json: %v", dir, err)
	}
	if _, ok := pkg.Dependencies["e2b"]; !ok {
		t.Fatalf("e2e: %s/package.json does not depend on e2b", dir)
	}
	for name := range pkg.Dependencies {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", name, "package.json")); err != nil {
			t.Fatalf("e2e: npm package %s missing in %s/node_modules — run `make deps`: %v", name, dir, err)
		}
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatalf("e2e: node not on PATH — run `make deps`: %v", err)
	}
	return dir
}

// serveArgs are the extra `forkbox serve` flags of the e2e daemon: a fast TTL
// sweep, so expiry checks measure the daemon and not the sweep period.
func serveArgs(t *testing.T) []string {
	t.Helper()
	bin := filepath.Join(daemontest.BinDir(t), "forkbox")
	out, _ := exec.Command(bin, "serve", "--help").CombinedOutput()
	if strings.Contains(string(out), "sweep-interval") {
		// The unmodified clients run against the daemon as users get it:
		// with its pool of sandboxes restored ahead of time.
		return []string{"--sweep-interval", "200ms", "--pool-size", "2"}
	}
	t.Logf("e2e: `forkbox serve` has no --sweep-interval flag; using the default sweep")
	return nil
}

// startDaemon starts a daemon for the test (daemontest adds its own network
// index and a 200 ms sweep; the flag is passed again here in case that
// changes). Its data dir is checked after daemontest has stopped the daemon
// and undone runsc's known null-netns bind mount: anything still mounted
// there is a leak on the host, reported as a failure and then cleaned up so
// the next run starts clean.
func startDaemon(t *testing.T, extraArgs ...string) *daemontest.Daemon {
	t.Helper()
	return startDaemonIn(t, dataDir(t), extraArgs...)
}

// startDaemonIn is startDaemon on a data dir from dataDir.
func startDaemonIn(t *testing.T, dir string, extraArgs ...string) *daemontest.Daemon {
	t.Helper()
	return daemontest.Start(t, daemontest.Options{DataDir: dir, ExtraArgs: append(serveArgs(t), extraArgs...)})
}

// dataDir makes a daemon's data dir, removed when the test ends.
func dataDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "forkbox-e2e-")
	if err != nil {
		t.Fatal(err)
	}
	// Registered before Start, so it runs after the daemon's own cleanup
	// (Stop: kill every sandbox, SIGTERM).
	t.Cleanup(func() {
		if left := daemonproc.MountsUnder(dir); len(left) > 0 {
			t.Errorf("e2e: the stopped daemon left %d mount(s) under its data dir: %s", len(left), strings.Join(left, ", "))
			daemonproc.UnmountUnder(dir)
		}
		if err := os.RemoveAll(dir); err != nil {
			t.Errorf("e2e: remove the daemon's data dir: %v", err)
		}
	})
	return dir
}

// clientEnv is the environment of an unmodified E2B client pointed at d:
// E2B_DEBUG would bypass the API, so it is removed.
func clientEnv(d *daemontest.Daemon) []string {
	var env []string
	for _, kv := range d.Env() {
		if strings.HasPrefix(kv, "E2B_DEBUG=") {
			continue
		}
		env = append(env, kv)
	}
	// limits.test.mjs kills a sandbox's runsc process from outside, found
	// through the runtime's handle under the data dir.
	return append(env, "FORKBOX_DATA_DIR="+d.DataDir)
}

// jsTestFiles lists test/e2e/js/*.test.mjs.
func jsTestFiles(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.test.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("e2e: no *.test.mjs in %s", dir)
	}
	sort.Strings(files)
	return files
}

// TestE2BClient runs every test/e2e/js/*.test.mjs file with node's test
// runner against one daemon, one Go subtest per file.
func TestE2BClient(t *testing.T) {
	dir := jsDir(t)
	d := startDaemon(t)
	env := clientEnv(d)
	for _, file := range jsTestFiles(t, dir) {
		name := strings.TrimSuffix(filepath.Base(file), ".test.mjs")
		t.Run(name, func(t *testing.T) {
			runNode(t, dir, env, "--test", "--test-concurrency=1", "--test-reporter=spec", filepath.Base(file))
			// A file must leave no sandbox behind.
			if ids := d.SandboxIDs(); len(ids) > 0 {
				t.Logf("e2e: %s left sandboxes behind: %v (killing them)", name, ids)
				d.KillAll()
			}
		})
	}
}

// runNode runs node with args in dir, streaming its output into the test
// log line by line, and fails the test if node exits non-zero.
func runNode(t *testing.T, dir string, env []string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), jsTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", args...)
	cmd.Dir = dir
	cmd.Env = env
	cmd.WaitDelay = 10 * time.Second
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	var (
		out  strings.Builder
		wg   sync.WaitGroup
		logM sync.Mutex
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
		for sc.Scan() {
			logM.Lock()
			t.Log(sc.Text())
			out.WriteString(sc.Text() + "\n")
			logM.Unlock()
		}
		io.Copy(io.Discard, pr)
	}()
	start := time.Now()
	err := cmd.Run()
	pw.Close()
	wg.Wait()
	if err != nil {
		t.Fatalf("node %s: %v after %s (see the output above)", strings.Join(args, " "), err, time.Since(start).Round(time.Millisecond))
	}
	return out.String()
}
