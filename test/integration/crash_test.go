package integration

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/forkbox/forkbox/client"
	"github.com/forkbox/forkbox/internal/daemontest"
)

// TestKill9MidOperations kills the daemon with SIGKILL in the middle of a
// pause, a clone and a snapshot. After the restart every sandbox and
// snapshot is accounted for — each sandbox answers or resumes, each snapshot
// starts a sandbox — and nothing is orphaned on the host.
func TestKill9MidOperations(t *testing.T) {
	for _, tc := range []struct {
		name  string
		delay time.Duration
		op    func(ctx context.Context, c *client.Client, id string) error
	}{
		{"pause", 5 * time.Millisecond, func(ctx context.Context, c *client.Client, id string) error {
			return c.Pause(ctx, id)
		}},
		{"clone", 300 * time.Millisecond, func(ctx context.Context, c *client.Client, id string) error {
			_, err := c.Clone(ctx, id, client.CloneOptions{Count: 4})
			return err
		}},
		{"snapshot", 30 * time.Millisecond, func(ctx context.Context, c *client.Client, id string) error {
			_, err := c.Snapshot(ctx, id, "")
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := daemontestContext(t)
			d, c := start(t)
			src := create(t, ctx, c, client.CreateOptions{})
			writeFile(t, ctx, src.Conn(), "/tmp/mark", tc.name)
			go tc.op(ctx, c, src.SandboxID) // its answer never comes: the daemon dies
			time.Sleep(tc.delay)
			d.Kill9()
			d.Restart()
			accountFor(t, ctx, d, c)
		})
	}
}

// accountFor checks every sandbox and snapshot the restarted daemon
// reports is usable, and that the host holds nothing else.
func accountFor(t *testing.T, ctx context.Context, d *daemontest.Daemon, c *client.Client) {
	t.Helper()
	list, _, err := c.ListSandboxes(ctx, client.ListOptions{State: []string{"running", "paused"}})
	if err != nil {
		t.Fatal(err)
	}
	var running []string
	for _, sb := range list {
		if sb.State == "paused" {
			if _, err := c.Connect(ctx, sb.SandboxID, 0); err != nil {
				t.Errorf("paused %s does not resume: %v", sb.SandboxID, err)
				continue
			}
		}
		conn := c.Conn(sb.SandboxID, sb.EnvdAccessToken)
		if got := readFile(t, ctx, conn, "/tmp/mark"); got == "" {
			t.Errorf("sandbox %s lost its file", sb.SandboxID)
		}
		running = append(running, sb.SandboxID)
	}
	snaps, _, err := c.ListSnapshots(ctx, client.SnapshotListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range snaps {
		nb, err := c.CreateSandbox(ctx, client.CreateOptions{TemplateID: s.SnapshotID})
		if err != nil {
			t.Errorf("snapshot %s is listed but unusable: %v", s.SnapshotID, err)
			continue
		}
		running = append(running, nb.SandboxID)
	}
	bundles := dirNames(filepath.Join(d.DataDir, "runtime", "sandboxes"))
	sort.Strings(running)
	if strings.Join(bundles, ",") != strings.Join(running, ",") {
		t.Errorf("runtime holds %v, daemon accounts for %v", bundles, running)
	}
	paused := dirNames(filepath.Join(d.DataDir, "images", "paused"))
	if len(paused) != 0 {
		t.Errorf("pause images of no paused sandbox: %v", paused)
	}
	images := dirNames(filepath.Join(d.DataDir, "images", "snapshots"))
	if len(images) > len(snaps) {
		t.Errorf("%d snapshot images on disk for %d snapshots", len(images), len(snaps))
	}
}

func dirNames(dir string) []string {
	ents, _ := os.ReadDir(dir)
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	sort.Strings(out)
	return out
}
