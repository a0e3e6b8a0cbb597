package e2e

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/forkbox/forkbox/internal/daemon/daemontest"
)

// Settings of the TLS daemon of TestConventions. The SDK builds
// https://<port>-<id>.<domain> without a port, so TLS must be on 443.
const (
	conventionsDomain = "forkbox.test"
	conventionsTLS    = "127.0.0.1:443"
	hostsFile         = "/etc/hosts"
	// hostsMarker tags the lines the JS test adds to hostsFile.
	hostsMarker = "# forkbox-e2e"
	// hostsLock serializes TestConventions runs on one host.
	hostsLock = "/run/lock/forkbox-e2e-conventions.lock"
)

// TestConventions runs js/conventions.test.mjs the way a client of E2B's
// cloud runs: no E2B_SANDBOX_URL, so the SDK reaches envd and every port at
// https://<port>-<id>.forkbox.test, served by the daemon's TLS listener
// with the certificate of its generated CA (trusted via NODE_EXTRA_CA_CERTS).
// The JS test adds each sandbox's host names to /etc/hosts (tagged with
// hostsMarker); they are removed when the test ends, pass or fail.
func TestConventions(t *testing.T) {
	dir := jsDir(t)
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "ws", "package.json")); err != nil {
		t.Fatalf("e2e: npm package ws missing in %s/node_modules — run `make deps`: %v", dir, err)
	}
	guardHostsFile(t)
	d := startTLSDaemon(t)
	ca := filepath.Join(d.DataDir, "tls", "ca.pem")
	if _, err := os.Stat(ca); err != nil {
		t.Fatalf("e2e: the daemon generated no CA: %v\n%s", err, d.Log())
	}
	for _, want := range []string{"NODE_EXTRA_CA_CERTS=" + ca, "SSL_CERT_FILE=" + ca} {
		if !d.Scan(want) {
			t.Errorf("e2e: the start-up banner lacks %q", want)
		}
	}
	var env []string
	for _, kv := range clientEnv(d) {
		if !strings.HasPrefix(kv, "E2B_SANDBOX_URL=") && !strings.HasPrefix(kv, "NODE_EXTRA_CA_CERTS=") {
			env = append(env, kv)
		}
	}
	env = append(env, "NODE_EXTRA_CA_CERTS="+ca, "FORKBOX_E2E_HOSTS_FILE="+hostsFile, "FORKBOX_E2E_HOSTS_IP=127.0.0.1")
	runNode(t, dir, env, "--test", "--test-concurrency=1", "--test-reporter=spec", "conventions.test.mjs")
	if ids := d.SandboxIDs(); len(ids) > 0 {
		t.Errorf("e2e: conventions left sandboxes behind: %v", ids)
	}
}

// startTLSDaemon starts the daemon of TestConventions: startDaemon's,
// serving TLS for the test domain too.
func startTLSDaemon(t *testing.T) *daemontest.Daemon {
	t.Helper()
	return startDaemon(t, "--domain", conventionsDomain, "--tls-listen", conventionsTLS)
}

// guardHostsFile serializes the runs of TestConventions on this host (they
// share 127.0.0.1:443 and /etc/hosts) with an exclusive lock held until the
// test ends, drops lines a crashed earlier run left in /etc/hosts, and
// removes the lines this run added when the test ends, pass or fail. The
// file is rewritten in place: in a container it is often a bind mount.
func guardHostsFile(t *testing.T) {
	t.Helper()
	lock, err := os.OpenFile(hostsLock, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatalf("e2e: open %s: %v", hostsLock, err)
	}
	t.Logf("e2e: waiting for %s (another run of TestConventions may hold it)", hostsLock)
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		t.Fatalf("e2e: lock %s: %v", hostsLock, err)
	}
	t.Cleanup(func() { lock.Close() }) // releases the lock, last
	dropMarkedHosts(t)
	t.Cleanup(func() { dropMarkedHosts(t) })
}

// dropMarkedHosts removes the lines carrying hostsMarker from hostsFile.
func dropMarkedHosts(t *testing.T) {
	t.Helper()
	b, err := os.ReadFile(hostsFile)
	if err != nil {
		t.Errorf("e2e: read %s: %v", hostsFile, err)
		return
	}
	if clean := withoutMarked(b); !bytes.Equal(clean, b) {
		if err := os.WriteFile(hostsFile, clean, 0o644); err != nil {
			t.Errorf("e2e: rewrite %s: %v", hostsFile, err)
		}
	}
}

// withoutMarked returns b without the lines carrying hostsMarker.
func withoutMarked(b []byte) []byte {
	var out []byte
	for _, line := range bytes.SplitAfter(b, []byte("\n")) {
		if !bytes.Contains(line, []byte(hostsMarker)) {
			out = append(out, line...)
		}
	}
	return out
}
