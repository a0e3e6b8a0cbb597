package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/forkbox/forkbox/client"
	"github.com/forkbox/forkbox/internal/daemon/daemontest"
	"github.com/forkbox/forkbox/internal/runtime/gvisor"
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
	checkFootprint(t, d, running)
	paused := dirNames(filepath.Join(d.DataDir, "images", "paused"))
	if len(paused) != 0 {
		t.Errorf("pause images of no paused sandbox: %v", paused)
	}
	images := dirNames(filepath.Join(d.DataDir, "images", "snapshots"))
	if len(images) > len(snaps) {
		t.Errorf("%d snapshot images on disk for %d snapshots", len(images), len(snaps))
	}
}

// checkFootprint checks that the host holds runsc containers and network
// namespaces only for sandboxes and for standby containers (created, never
// started, at most a few per shape). A standby container being made has
// its namespace a moment before runsc knows it, so a finding must persist
// for 3 s to count.
func checkFootprint(t *testing.T, d *daemontest.Daemon, sandboxes []string) {
	t.Helper()
	var problems []string
	for deadline := time.Now().Add(3 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		problems = footprintProblems(t, d, sandboxes)
		if len(problems) == 0 || time.Now().After(deadline) {
			break
		}
	}
	for _, p := range problems {
		t.Error(p)
	}
}

// footprintProblems lists what checkFootprint complains about right now.
func footprintProblems(t *testing.T, d *daemontest.Daemon, sandboxes []string) []string {
	t.Helper()
	var problems []string
	mine := map[string]bool{}
	for _, id := range sandboxes {
		mine[containerOf(t, d, id)] = true
	}
	root := filepath.Join(d.DataDir, "runtime", "runsc")
	out, err := exec.Command(filepath.Join(d.Bin, "runsc"), "--root", root, "list", "--format=json").Output()
	if err != nil {
		t.Fatalf("runsc list: %v", err)
	}
	var list []struct{ ID, Status string }
	if err := json.Unmarshal(out, &list); err != nil {
		t.Fatalf("runsc list: %v: %s", err, out)
	}
	containers, standby := map[string]bool{}, 0
	for _, c := range list {
		containers[c.ID] = true
		switch {
		case mine[c.ID]:
		case c.Status == "created":
			standby++
		default:
			problems = append(problems, fmt.Sprintf("runsc container %s (%s) belongs to no sandbox", c.ID, c.Status))
		}
	}
	if standby > 4 {
		problems = append(problems, fmt.Sprintf("%d standby containers, want at most 2 per shape (2 shapes)", standby))
	}
	for id := range mine {
		if !containers[id] {
			problems = append(problems, fmt.Sprintf("sandbox container %s is not known to runsc", id))
		}
	}
	ents, _ := os.ReadDir("/var/run/netns")
	for _, e := range ents {
		if id, ok := strings.CutPrefix(e.Name(), daemontest.NetNSPrefix()); ok && !containers[id] {
			problems = append(problems, fmt.Sprintf("network namespace %s belongs to no container", e.Name()))
		}
	}
	for pid, p := range gvisor.RunscProcesses(root) {
		if !containers[p.Container] {
			problems = append(problems, fmt.Sprintf("runsc process %d (%s, bundle of %s) belongs to no container", pid, p.Argv0, p.Container))
		}
	}
	return problems
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
