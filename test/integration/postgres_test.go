package integration

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/forkbox/forkbox/client"
	"github.com/forkbox/forkbox/internal/daemon/daemontest"
	"github.com/forkbox/forkbox/internal/store/pgtest"
)

// startOnDatabase starts a daemon keeping its records in the PostgreSQL
// database url, under node id node; index > 0 gives it its own network.
func startOnDatabase(t testing.TB, url, node string, index int, extra ...string) *daemontest.Daemon {
	args := append([]string{"--database", url, "--node-id", node}, extra...)
	if index > 0 {
		args = append(args, "--network-index", fmt.Sprint(index))
		t.Cleanup(func() { exec.Command("nft", "delete", "table", "inet", fmt.Sprintf("forkbox%d", index)).Run() })
	}
	return daemontest.Start(t, daemontest.Options{ExtraArgs: args})
}

// startPair starts node-a and node-b at once on one fresh PostgreSQL
// database, with extraA and extraB as their extra flags.
func startPair(t *testing.T, extraA, extraB []string) (a, b *daemontest.Daemon) {
	url := pgtest.Start(t).NewDatabase(t)
	var wg sync.WaitGroup
	second := secondIndex(t)
	wg.Add(2)
	go func() { defer wg.Done(); a = startOnDatabase(t, url, "node-a", 0, extraA...) }()
	go func() { defer wg.Done(); b = startOnDatabase(t, url, "node-b", second, extraB...) }()
	wg.Wait()
	if a == nil || b == nil {
		t.Fatal("a daemon did not start")
	}
	return a, b
}

// freeAddr is a free loopback address (host:port).
func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// secondIndex reserves, for t, a network index no other daemon of any
// test process has: a second node's.
func secondIndex(t testing.TB) int { return daemontest.ReserveIndex(t) }

// TestPostgresTwoDaemons: two daemons started at once on one fresh
// PostgreSQL database share the API key, the CAs and the secrets key, and
// see the records (secrets, volumes, snapshots, sandboxes) made through
// the other.
func TestPostgresTwoDaemons(t *testing.T) {
	ctx := daemontest.Context(t)
	tlsA, tlsB := freeAddr(t), freeAddr(t)
	a, b := startPair(t, []string{"--tls-listen", tlsA}, []string{"--tls-listen", tlsB})
	// Both nodes' TLS listeners present a certificate a client trusting
	// the cluster's one CA (as written by node a) accepts.
	roots := x509.NewCertPool()
	if pemA, err := os.ReadFile(filepath.Join(a.DataDir, "tls", "ca.pem")); err != nil || !roots.AppendCertsFromPEM(pemA) {
		t.Fatalf("node a's CA: %v", err)
	}
	for _, addr := range []string{tlsA, tlsB} {
		conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: roots, ServerName: "localhost"})
		if err != nil {
			t.Errorf("TLS to %s with the cluster CA: %v", addr, err)
			continue
		}
		conn.Close()
	}
	for _, rel := range []string{"api-key", "tls/ca.pem", "tls/ca-key.pem", "egress-ca/ca.pem", "egress-ca/ca-key.pem", "secrets.key"} {
		fa, errA := os.ReadFile(filepath.Join(a.DataDir, rel))
		fb, errB := os.ReadFile(filepath.Join(b.DataDir, rel))
		if errA != nil || errB != nil || len(fa) == 0 || !bytes.Equal(fa, fb) {
			t.Errorf("%s differs between the nodes (%v, %v)", rel, errA, errB)
		}
	}
	ca, cb := client.New(a.URL, a.APIKey), client.New(b.URL, a.APIKey) // a's key on b
	if _, err := cb.CreateSecret(ctx, "shared-token", "s3cr3t", map[string]string{"by": "b"}); err != nil {
		t.Fatalf("b with a's key: %v", err)
	}
	if sec, err := ca.GetSecret(ctx, "shared-token"); err != nil || sec.Metadata["by"] != "b" {
		t.Errorf("a reads b's secret: %+v %v", sec, err)
	}
	vol, err := ca.CreateVolume(ctx, "shared-vol")
	if err != nil {
		t.Fatal(err)
	}
	if vs, err := cb.ListVolumes(ctx); err != nil || !slices.ContainsFunc(vs, func(v client.Volume) bool { return v.ID == vol.ID }) {
		t.Errorf("b lists %v (%v), want a's volume %s", vs, err, vol.ID)
	}
	if _, err := cb.CreateVolume(ctx, "shared-vol"); !isStatus(err, http.StatusConflict) {
		t.Errorf("b creates a second volume named shared-vol: %v, want 409", err)
	}
	sb := create(t, ctx, ca, client.CreateOptions{Metadata: map[string]string{"t": "pg-two"}})
	snap, err := ca.Snapshot(ctx, sb.SandboxID, "")
	if err != nil {
		t.Fatal(err)
	}
	snaps, _, err := cb.ListSnapshots(ctx, client.SnapshotListOptions{})
	if err != nil || !slices.ContainsFunc(snaps, func(s client.SnapshotInfo) bool { return s.SnapshotID == snap.SnapshotID }) {
		t.Errorf("b lists snapshots %v (%v), want a's %s", snaps, err, snap.SnapshotID)
	}
	list, _, err := cb.ListSandboxes(ctx, client.ListOptions{Metadata: map[string]string{"t": "pg-two"}})
	if err != nil || len(list) != 1 || list[0].SandboxID != sb.SandboxID || list[0].ClientID != "node-a" {
		t.Errorf("b lists %+v (%v), want a's sandbox on node-a", list, err)
	}
	// b forwards what is about a's sandbox to a, which runs it: a
	// command sent to b runs there, and a kill sent to b ends it on a.
	if got := sh(t, ctx, cb.Conn(sb.SandboxID, sb.EnvdAccessToken), "echo via-b"); got != "via-b" {
		t.Errorf("a's sandbox through b answers %q", got)
	}
	if err := cb.KillSandbox(ctx, sb.SandboxID); err != nil {
		t.Errorf("b kills a's sandbox: %v", err)
	}
	if _, err := ca.GetSandbox(ctx, sb.SandboxID); !client.IsNotFound(err) {
		t.Errorf("a after b forwarded the kill of its sandbox: %v, want 404", err)
	}
	for _, err := range []error{ca.DeleteSnapshot(ctx, snap.SnapshotID), ca.DeleteVolume(ctx, vol.ID)} {
		if err != nil {
			t.Error(err)
		}
	}
}

func isStatus(err error, status int) bool {
	var e *client.Error
	return asError(err, &e) && e.Status == status
}

// TestPostgresKill9Restart: a daemon on PostgreSQL killed with -9 and
// started again on the same database knows every sandbox, snapshot and
// template, and resumes the paused sandbox with its memory intact.
func TestPostgresKill9Restart(t *testing.T) {
	ctx := daemontest.Context(t)
	url := pgtest.Start(t).NewDatabase(t)
	d := startOnDatabase(t, url, "node-a", 0)
	c := client.New(d.URL, d.APIKey)
	running := create(t, ctx, c, client.CreateOptions{Metadata: map[string]string{"t": "pg-restart"}})
	paused := create(t, ctx, c, client.CreateOptions{Metadata: map[string]string{"t": "pg-restart"}})
	startState(t, ctx, paused.Conn())
	token, n := readState(ctx, paused.Conn())
	if err := c.Pause(ctx, paused.SandboxID); err != nil {
		t.Fatal(err)
	}
	// The pause finishes in the background (the API says "paused" from its
	// start): kill the daemon once its log says the image is kept.
	waitFor(t, time.Minute, func() bool {
		return strings.Contains(d.Log(), `msg="sandbox paused" sandbox=`+paused.SandboxID)
	})
	snap, err := c.Snapshot(ctx, running.SandboxID, "pg-snap")
	if err != nil {
		t.Fatal(err)
	}
	d.Kill9()
	d.Restart()
	if st := state(t, ctx, c, running.SandboxID); st != "running" {
		t.Errorf("running sandbox after restart: %s", st)
	}
	if st := state(t, ctx, c, paused.SandboxID); st != "paused" {
		t.Errorf("paused sandbox after restart: %s", st)
	}
	snaps, _, err := c.ListSnapshots(ctx, client.SnapshotListOptions{})
	if err != nil || !slices.ContainsFunc(snaps, func(s client.SnapshotInfo) bool { return s.SnapshotID == snap.SnapshotID }) {
		t.Errorf("snapshots after restart: %v %v", snaps, err)
	}
	tpls, err := c.ListTemplates(ctx)
	if err != nil || len(tpls) == 0 {
		t.Errorf("templates after restart: %v %v", tpls, err)
	}
	resumed, err := c.Connect(ctx, paused.SandboxID, time.Minute)
	if err != nil {
		t.Fatalf("resume after restart: %v", err)
	}
	checkContinues(t, ctx, resumed.Conn(), token, n)
	if got := sh(t, ctx, running.Conn(), "echo alive"); got != "alive" {
		t.Errorf("running sandbox after restart answers %q", got)
	}
	// A second daemon given node-a's id is refused before it reads a
	// record as its own: node-a's running sandbox stays running.
	serveFails(t, "node id node-a is taken by a running daemon at "+d.URL, "--database", url, "--node-id", "node-a",
		"--network-index", fmt.Sprint(secondIndex(t)))
	if st := state(t, ctx, c, running.SandboxID); st != "running" {
		t.Errorf("running sandbox after a second node-a was refused: %s", st)
	}
	if got := sh(t, ctx, running.Conn(), "echo alive"); got != "alive" {
		t.Errorf("running sandbox after a second node-a was refused answers %q", got)
	}
}

// TestPostgresOutage: while the database is down the API answers 503
// with a message; once it is back the daemon serves again by itself.
func TestPostgresOutage(t *testing.T) {
	ctx := daemontest.Context(t)
	srv := pgtest.Start(t)
	d := startOnDatabase(t, srv.NewDatabase(t), "node-a", 0)
	c := client.New(d.URL, d.APIKey)
	if _, _, err := c.ListSandboxes(ctx, client.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	_, _, err := c.ListSandboxes(ctx, client.ListOptions{})
	var e *client.Error
	if !asError(err, &e) || e.Status != http.StatusServiceUnavailable || !strings.Contains(e.Message, "database") {
		t.Fatalf("list with the database down: %v, want 503 naming the database", err)
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 15*time.Second, func() bool {
		_, _, err := c.ListSandboxes(ctx, client.ListOptions{})
		return err == nil
	})
	sb := create(t, ctx, c, client.CreateOptions{})
	if err := c.KillSandbox(ctx, sb.SandboxID); err != nil {
		t.Fatal(err)
	}
}

// TestPostgresBadDatabase: a bad --database URL and an unreachable
// database both stop `forkbox serve` with a non-zero exit and the reason,
// promptly.
func TestPostgresBadDatabase(t *testing.T) {
	srv := pgtest.Start(t)
	down := srv.NewDatabase(t)
	srv.Stop()
	for _, tc := range []struct{ url, want string }{
		{"mysql://db.internal/forkbox", "is not supported"},
		{"postgres://h:notaport/x", "database URL"},
		{down, "unreachable"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			serveFails(t, tc.want, "--database", tc.url, "--network-index", fmt.Sprint(daemontest.NetworkIndex()))
		})
	}
}

// serveFails runs `forkbox serve` with args (and a data dir of its own,
// pool off) and wants it to exit non-zero within 20 s, saying want.
func serveFails(t *testing.T, want string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(daemontest.BinDir(t), "forkbox"), append([]string{"serve", "--listen", "127.0.0.1:0",
		"--data-dir", t.TempDir(), "--template-dir", daemontest.TemplateDir(t), "--pool-size", "0"}, args...)...)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err == nil || ctx.Err() != nil || !strings.Contains(string(out), want) {
		t.Fatalf("serve %v: %v after %v, want a non-zero exit saying %q:\n%s", args, err, time.Since(start), want, out)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("took %v to give up", d)
	}
}
