package integration

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/forkbox/forkbox/client"
	"github.com/forkbox/forkbox/internal/daemon/daemontest"
)

// execOut is one command's outcome.
type execOut struct {
	stdout, stderr string
	code           int
}

func runLogin(t *testing.T, ctx context.Context, conn *client.SandboxConn, cmd, stdin string) execOut {
	t.Helper()
	var out, errOut bytes.Buffer
	o := client.ExecOptions{Cmd: []string{"/bin/bash", "-l", "-c", cmd}, Stdout: &out, Stderr: &errOut}
	if stdin != "" {
		o.Stdin = strings.NewReader(stdin)
	}
	code, err := conn.Exec(ctx, o)
	if err != nil {
		t.Fatalf("exec %q: %v", cmd, err)
	}
	return execOut{out.String(), errOut.String(), code}
}

// pooledProbe is a command whose output tells a pooled shell (its argv is
// the pool's wrapper) from a fresh one.
const pooledProbe = `echo "$(tr '\0' ' ' </proc/$$/cmdline)"`

// TestCommandPoolMatchesFreshInSandbox runs the same commands in a sandbox
// of a daemon with the command pool (the default) and one with
// --command-pool 0, and compares them output for output, in the real
// sandbox user, profile files and gVisor.
func TestCommandPoolMatchesFreshInSandbox(t *testing.T) {
	ctx := daemontestContext(t)
	cases := []struct{ name, cmd, stdin string }{
		{"echo", "echo hi", ""},
		{"environment", "env | grep -v -e '^HOSTNAME=' | sort", ""},
		{"identity", `id; pwd; umask; echo "$0|$-|$SHLVL|$#|$_|$?|$((SECONDS < 2))"; shopt login_shell; echo "$BASH_EXECUTION_STRING"`, ""},
		{"limits", `ulimit -a; grep -E '^(Uid|Gid|Groups|NoNewPrivs|Cap(Inh|Prm|Eff|Bnd)):' /proc/$$/status; grep -E '^Sig(Blk|Ign):|^Cpus_allowed_list' /proc/self/status; :`, ""},
		{"descriptors", `ls /proc/$$/fd; readlink /proc/$$/fd/0 | sed 's/:\[[0-9]*\]//'; :`, ""},
		{"stdin", `read -r line; echo "got $line"; cat`, "one\ntwo\n"},
		{"exit code and stderr", "echo out; echo err >&2; no-such-command-xyz; exit 7", ""},
		{"killed by a signal", "echo before; kill -TERM $$; echo after", ""},
		{"background job", "sleep 0.2 & echo started; wait; echo done", ""},
	}
	// The daemons run one after the other: daemons of one test process
	// share a network index.
	want := make([]execOut, len(cases))
	func() {
		d := daemontest.Start(t, daemontest.Options{ExtraArgs: []string{"--command-pool", "0"}})
		defer d.Stop()
		conn := create(t, ctx, client.New(d.URL, d.APIKey), client.CreateOptions{EnvVars: map[string]string{"FROM_CREATE": "c"}}).Conn()
		if got := runLogin(t, ctx, conn, pooledProbe, ""); strings.Contains(got.stdout, "__fb_") {
			t.Fatalf("--command-pool 0 still ran a pooled shell: %q", got.stdout)
		}
		for i, tc := range cases {
			want[i] = runLogin(t, ctx, conn, tc.cmd, tc.stdin)
		}
	}()
	d := daemontest.Start(t, daemontest.Options{})
	conn := create(t, ctx, client.New(d.URL, d.APIKey), client.CreateOptions{EnvVars: map[string]string{"FROM_CREATE": "c"}}).Conn()
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			waitPooled(t, ctx, conn)
			time.Sleep(300 * time.Millisecond) // the pool refills after the probe
			if got := runLogin(t, ctx, conn, tc.cmd, tc.stdin); got != want[i] {
				t.Fatalf("pooled and fresh differ:\npooled: %+v\nfresh:  %+v", got, want[i])
			}
		})
	}
}

// waitPooled waits until a command in conn is run by a pooled shell.
func waitPooled(t *testing.T, ctx context.Context, conn *client.SandboxConn) {
	t.Helper()
	var last string
	deadline := time.Now().Add(time.Minute) // a loaded host starts login shells slowly
	for time.Now().Before(deadline) {
		time.Sleep(300 * time.Millisecond)
		if last = runLogin(t, ctx, conn, pooledProbe, "").stdout; strings.Contains(last, "__fb_") {
			return
		}
	}
	t.Fatalf("no command ran in a pooled shell within a minute; last argv %q", last)
}

// TestFirstCommandPooled: with the warm pool, a create's first command is
// run by the login shell its pooled sandbox started before the create took
// it; the first command after a pause and resume, in a clone, and after a
// rollback, by the shell the image held.
func TestFirstCommandPooled(t *testing.T) {
	ctx := daemontestContext(t)
	d := daemontest.Start(t, daemontest.Options{ExtraArgs: []string{"--pool-size", "1"}})
	defer d.Stop()
	deadline := time.Now().Add(time.Minute)
	for metric(scrapeOK(t, ctx, d), `forkbox_pool_sandboxes{template="base"}`) < 1 {
		if time.Now().After(deadline) {
			t.Fatal("the warm pool did not fill within a minute")
		}
		time.Sleep(100 * time.Millisecond)
	}
	c := client.New(d.URL, d.APIKey)
	sb := create(t, ctx, c, client.CreateOptions{})
	if got := runLogin(t, ctx, sb.Conn(), pooledProbe, "").stdout; !strings.Contains(got, "__fb_") {
		t.Fatalf("a create's first command from the warm pool started fresh: argv %q", got)
	}
	waitPooled(t, ctx, sb.Conn())
	time.Sleep(1500 * time.Millisecond) // the pool refills before the pause
	if err := c.Pause(ctx, sb.SandboxID); err != nil {
		t.Fatal(err)
	}
	resumed, err := c.Connect(ctx, sb.SandboxID, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := runLogin(t, ctx, resumed.Conn(), pooledProbe, "").stdout; !strings.Contains(got, "__fb_") {
		t.Fatalf("the first command after a resume started fresh: argv %q", got)
	}
	if got := runLogin(t, ctx, resumed.Conn(), `echo "$USER $HOME $((6*7))"`, ""); got.stdout != "user /home/user 42\n" || got.code != 0 {
		t.Fatalf("a command after the resume: %+v", got)
	}
	time.Sleep(1500 * time.Millisecond) // the pool refills before the snapshot
	snap, err := c.Snapshot(ctx, sb.SandboxID, "")
	if err != nil {
		t.Fatal(err)
	}
	clones, err := c.Clone(ctx, sb.SandboxID, client.CloneOptions{Count: 1})
	if err != nil || len(clones.Sandboxes) != 1 {
		t.Fatalf("clone: %v %+v", err, clones)
	}
	if got := runLogin(t, ctx, clones.Sandboxes[0].Conn(), pooledProbe, "").stdout; !strings.Contains(got, "__fb_") {
		t.Fatalf("a clone's first command started fresh: argv %q", got)
	}
	runLogin(t, ctx, resumed.Conn(), "echo spend the ready shell", "")
	if _, err := c.Rollback(ctx, sb.SandboxID, snap.SnapshotID); err != nil {
		t.Fatal(err)
	}
	if got := runLogin(t, ctx, resumed.Conn(), pooledProbe, "").stdout; !strings.Contains(got, "__fb_") {
		t.Fatalf("the first command after a rollback started fresh: argv %q", got)
	}
}

// scrapeOK scrapes d's /metrics and fails unless it answers 200.
func scrapeOK(t *testing.T, ctx context.Context, d *daemontest.Daemon) string {
	t.Helper()
	code, text := scrape(t, ctx, d.URL, d.APIKey)
	if code != 200 {
		t.Fatalf("/metrics: %d", code)
	}
	return text
}
