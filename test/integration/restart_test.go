// Package integration tests a real daemon (real runsc) through the Go SDK:
// restarts, crashes and the host state left behind.
package integration

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/forkbox/forkbox/client"
	"github.com/forkbox/forkbox/internal/daemon/daemonproc"
	"github.com/forkbox/forkbox/internal/daemon/daemontest"
)

func start(t *testing.T) (*daemontest.Daemon, *client.Client) {
	d := daemontest.Start(t, daemontest.Options{})
	return d, client.New(d.URL, d.APIKey)
}

func sh(t *testing.T, ctx context.Context, c *client.SandboxConn, cmd string) string {
	t.Helper()
	var out, errb bytes.Buffer
	code, err := c.Exec(ctx, client.ExecOptions{Shell: cmd, Stdout: &out, Stderr: &errb, User: "root"})
	if err != nil || code != 0 {
		t.Fatalf("%q: code %d err %v stderr %s", cmd, code, err, errb.String())
	}
	return strings.TrimSpace(out.String())
}

// TestKill9KeepsSandboxes kills the daemon with SIGKILL and restarts it: the
// running sandbox, its files and its processes are all still there, and a
// sandbox that died meanwhile is accounted for and cleaned up.
func TestKill9KeepsSandboxes(t *testing.T) {
	ctx := daemontest.Context(t)
	d, c := start(t)
	sb, err := c.CreateSandbox(ctx, client.CreateOptions{TemplateID: "base", Metadata: map[string]string{"t": "restart"}})
	if err != nil {
		t.Fatal(err)
	}
	conn := sb.Conn()
	if err := conn.WriteFile(ctx, "/tmp/keep.txt", []byte("still here")); err != nil {
		t.Fatal(err)
	}
	startState(t, ctx, conn)
	token, before := readState(ctx, conn)

	doomed, err := c.CreateSandbox(ctx, client.CreateOptions{TemplateID: "base"})
	if err != nil {
		t.Fatal(err)
	}
	doomedCID, sbCID := containerOf(t, d, doomed.SandboxID), containerOf(t, d, sb.SandboxID)
	d.Kill9()
	// While the daemon is down, one sandbox dies behind its back.
	runsc(t, d, "kill", doomedCID, "KILL")
	time.Sleep(500 * time.Millisecond)
	d.Restart()

	info, err := c.GetSandbox(ctx, sb.SandboxID)
	if err != nil || info.State != "running" {
		t.Fatalf("after restart: %+v %v\n%s", info, err, d.Log())
	}
	if got, _ := conn.ReadFile(ctx, "/tmp/keep.txt"); string(got) != "still here" {
		t.Errorf("file after restart: %q", got)
	}
	checkContinues(t, ctx, conn, token, before)
	if _, err := c.GetSandbox(ctx, doomed.SandboxID); !client.IsNotFound(err) {
		t.Errorf("dead sandbox after restart: %v", err)
	}
	if leftovers := hostState(t, doomed.SandboxID, doomedCID); leftovers != "" {
		t.Errorf("dead sandbox left on the host: %s", leftovers)
	}
	list, _, err := c.ListSandboxes(ctx, client.ListOptions{Metadata: map[string]string{"t": "restart"}})
	if err != nil || len(list) != 1 {
		t.Errorf("list after restart: %v %v", list, err)
	}
	if err := c.KillSandbox(ctx, sb.SandboxID); err != nil {
		t.Fatal(err)
	}
	if leftovers := hostState(t, sb.SandboxID, sbCID); leftovers != "" {
		t.Errorf("killed sandbox left on the host: %s", leftovers)
	}
}

// runsc runs a runsc verb against the daemon's runsc state directory.
func runsc(t *testing.T, d *daemontest.Daemon, args ...string) {
	t.Helper()
	root := filepath.Join(d.DataDir, "runtime", "runsc")
	all := append([]string{"--root", root}, args...)
	if out, err := exec.Command(filepath.Join(d.Bin, "runsc"), all...).CombinedOutput(); err != nil {
		t.Fatalf("runsc %v: %v: %s", args, err, out)
	}
}

// containerOf returns the runsc container id of sandbox id, which names its
// network namespace and cgroups: the sandbox id, or the id of the standby
// container the sandbox was restored into.
func containerOf(t *testing.T, d *daemontest.Daemon, id string) string {
	t.Helper()
	cid, err := daemonproc.ContainerOf(d.DataDir, id)
	if err != nil {
		t.Fatal(err)
	}
	return cid
}

// hostState describes what the host still holds under any of ids: a
// network namespace, a cgroup or a runsc process. Empty means nothing.
func hostState(t *testing.T, ids ...string) string {
	var found []string
	for _, id := range ids {
		found = append(found, hostStateOf(id)...)
	}
	return strings.Join(found, "; ")
}

func hostStateOf(id string) []string {
	var found []string
	if ents, err := os.ReadDir("/var/run/netns"); err == nil {
		for _, e := range ents {
			if strings.HasSuffix(e.Name(), id) {
				found = append(found, "netns "+e.Name())
			}
		}
	}
	for _, ctl := range []string{"memory", "pids", "cpu"} {
		matches, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", ctl, "*", id))
		for _, m := range matches {
			found = append(found, "cgroup "+m)
		}
	}
	if out, _ := exec.Command("pgrep", "-f", "runsc.*"+id).Output(); len(bytes.TrimSpace(out)) > 0 {
		found = append(found, "processes "+strings.Join(strings.Fields(string(out)), ","))
	}
	return found
}
