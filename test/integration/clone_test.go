package integration

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/forkbox/forkbox/client"
	"github.com/forkbox/forkbox/internal/daemon/daemontest"
)

// TestCloneRunning: N=3 clones inherit the past, are isolated from each
// other and the source, and the source keeps running with its state.
func TestCloneRunning(t *testing.T) {
	ctx := daemontestContext(t)
	_, c := start(t)
	src := create(t, ctx, c, client.CreateOptions{})
	sconn := src.Conn()
	writeFile(t, ctx, sconn, "/home/user/before.txt", "inherited")
	startState(t, ctx, sconn)
	tok, n := readState(ctx, sconn)
	t0 := time.Now()
	res, err := c.Clone(ctx, src.SandboxID, client.CloneOptions{Count: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("clone x3: %s", time.Since(t0))
	if len(res.Sandboxes) != 3 || res.SnapshotTemplateID == "" {
		t.Fatalf("clone result: %+v", res)
	}
	for i, cl := range res.Sandboxes {
		conn := cl.Conn()
		if got := readFile(t, ctx, conn, "/home/user/before.txt"); got != "inherited" {
			t.Errorf("clone %d: before.txt = %q", i, got)
		}
		checkContinues(t, ctx, conn, tok, n) // the same process, copied
		writeFile(t, ctx, conn, "/home/user/mine.txt", cl.SandboxID)
	}
	for i, cl := range res.Sandboxes {
		if got := readFile(t, ctx, cl.Conn(), "/home/user/mine.txt"); got != cl.SandboxID {
			t.Errorf("clone %d sees another clone's write: %q", i, got)
		}
	}
	if _, err := sconn.ReadFile(ctx, "/home/user/mine.txt"); err == nil {
		t.Error("a clone's write is visible in the source")
	}
	checkContinues(t, ctx, sconn, tok, n)
	if st := state(t, ctx, c, src.SandboxID); st != "running" {
		t.Errorf("source is %s after clone", st)
	}
	// The clone snapshot is refcounted: not deletable while users live.
	if err := c.DeleteSnapshot(ctx, res.SnapshotTemplateID); !client.IsConflict(err) {
		t.Errorf("delete clone snapshot in use: %v, want 409", err)
	}
}

// TestClonePausedStaysPaused: cloning a paused sandbox does not start it.
func TestClonePausedStaysPaused(t *testing.T) {
	ctx := daemontestContext(t)
	_, c := start(t)
	src := create(t, ctx, c, client.CreateOptions{})
	writeFile(t, ctx, src.Conn(), "/tmp/x", "paused-state")
	if err := c.Pause(ctx, src.SandboxID); err != nil {
		t.Fatal(err)
	}
	clones, err := c.CloneAll(ctx, src.SandboxID, 2, 2)
	if err != nil {
		t.Fatal(err)
	}
	res := client.CloneResult{Sandboxes: clones}
	if st := state(t, ctx, c, src.SandboxID); st != "paused" {
		t.Errorf("paused source is %s after clone", st)
	}
	for _, cl := range res.Sandboxes {
		if got := readFile(t, ctx, cl.Conn(), "/tmp/x"); got != "paused-state" {
			t.Errorf("clone of paused reads %q", got)
		}
	}
}

// TestStrictCloneFailureLeavesNothing: with the second restore failing, a
// strict clone fails and leaves no sandbox, namespace, cgroup or image.
func TestStrictCloneFailureLeavesNothing(t *testing.T) {
	ctx := daemontestContext(t)
	d := daemontest.Start(t, daemontest.Options{Env: []string{"FORKBOX_FAULTS=restore=2"}})
	c := client.New(d.URL, d.APIKey)
	src := create(t, ctx, c, client.CreateOptions{})
	before := d.SandboxIDs()
	// The SDK's all-or-nothing helper: clone(n, concurrency).
	_, err := c.CloneAll(ctx, src.SandboxID, 3, 2)
	if err == nil {
		t.Fatal("strict clone with an injected failure succeeded")
	}
	after := d.SandboxIDs()
	if len(after) != len(before) || len(after) != 1 {
		t.Errorf("sandboxes before %v, after %v", before, after)
	}
	snaps, _, _ := c.ListSandboxes(ctx, client.ListOptions{})
	if len(snaps) != 1 {
		t.Errorf("%d sandboxes listed, want the source only", len(snaps))
	}
	list, _, err := c.ListSnapshots(ctx, client.SnapshotListOptions{})
	if err != nil || len(list) != 0 {
		t.Errorf("snapshots left: %v %v", list, err)
	}
	imgs, _ := filepath.Glob(filepath.Join(d.DataDir, "images", "snapshots", "*"))
	if len(imgs) != 0 {
		t.Errorf("snapshot images left on disk: %v", imgs)
	}
	bundles, _ := os.ReadDir(filepath.Join(d.DataDir, "runtime", "sandboxes"))
	if len(bundles) != 1 {
		t.Errorf("runtime holds %d sandboxes, want 1", len(bundles))
	}
	for _, b := range bundles {
		if b.Name() != src.SandboxID {
			t.Errorf("leftover runtime sandbox %s: %s", b.Name(), hostState(t, b.Name()))
		}
	}
}
