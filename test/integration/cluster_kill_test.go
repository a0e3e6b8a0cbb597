package integration

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/forkbox/forkbox/client"
	"github.com/forkbox/forkbox/internal/daemon/daemontest"
	"github.com/forkbox/forkbox/internal/images/s3test"
	"github.com/forkbox/forkbox/internal/runtime/gvisor"
	"github.com/forkbox/forkbox/internal/store/pgtest"
)

// TestClusterKill9MidWork: a node killed with -9 and restarted in the
// middle of a clone spread over two nodes, and in the middle of a pause's
// upload to the object store, leaves no orphan. The strict clone fails
// and none of its copies runs or is listed once the killed node is back
// (the clone's node kills them then); the pause finishes at the restart
// (its image was staged) and the sandbox resumes with its memory; every
// node runs exactly the sandboxes listed as
// running there, and the bucket holds exactly the listed paused
// sandboxes' and snapshots' images.
func TestClusterKill9MidWork(t *testing.T) {
	ctx := daemontest.Context(t)
	url := pgtest.Start(t).NewDatabase(t)
	srv := s3test.Start(t)
	// A lease longer than a restart: each killed node is back before the
	// other declares it dead, as under systemd's Restart=always, and
	// finds its records as it left them.
	args := slices.Concat(nodeArgs, []string{"--node-lease", "20s"})
	a := startClusterNode(t, url, srv, "node-a", 0, args)
	b := startClusterNode(t, url, srv, "node-b", secondIndex(t), args)
	ca := client.New(a.URL, a.APIKey)
	nodes := map[string]*daemontest.Daemon{"node-a": a, "node-b": b}

	if _, err := ca.DrainNode(ctx, "node-b"); err != nil {
		t.Fatal(err)
	}
	src := create(t, ctx, ca, client.CreateOptions{})
	if _, err := ca.UndrainNode(ctx, "node-b"); err != nil {
		t.Fatal(err)
	}
	conn := src.Conn()
	startState(t, ctx, conn)

	// Kill b once its first copy is up and the others are on their way.
	cloned := make(chan error, 1)
	go func() {
		_, err := ca.Clone(ctx, src.SandboxID, client.CloneOptions{Count: 10, Strict: true, Concurrency: 2})
		cloned <- err
	}()
	waitFor(t, 2*time.Minute, func() bool { return strings.Contains(b.Log(), "sandbox created as a clone") })
	b.Kill9()
	if err := <-cloned; err == nil {
		t.Fatal("strict clone with node b killed in its middle succeeded")
	} else {
		t.Logf("strict clone with node b killed: %v", err)
	}
	b.Restart()
	settled(t, ctx, ca, srv, nodes, []string{src.SandboxID})
	// Node a logs the kill once node b answered it, which may come just
	// after the listing stopped showing the copy.
	if !eventually(10*time.Second, func() bool { return strings.Contains(a.Log(), "undo clone: copy killed on its node") }) {
		t.Error("node a did not kill the copies node b brought back")
	}

	// Kill a while the pause uploads src's image: blobs are arriving, the
	// manifest is not written yet.
	sh(t, ctx, conn, "head -c 150000000 /dev/urandom > /dev/shm/ballast")
	tok, n := readState(ctx, conn)
	blobs := len(objects(t, srv, "cluster/blobs/"))
	if err := ca.Pause(ctx, src.SandboxID); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 2*time.Minute, func() bool { return len(objects(t, srv, "cluster/blobs/")) > blobs })
	committed := len(objects(t, srv, "cluster/images/paused/")) > 0
	a.Kill9()
	t.Logf("node a killed mid-pause (manifest already written: %v)", committed)
	a.Restart()
	var last string
	deadline := time.Now().Add(time.Minute)
	for ; time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		info, err := ca.GetSandbox(ctx, src.SandboxID)
		last = fmt.Sprintf("%+v %v", info, err)
		if err == nil && (info.State == "running" || info.State == "paused") {
			break
		}
	}
	if !time.Now().Before(deadline) {
		t.Fatalf("after the kill mid-pause the sandbox is %s\nnode a:\n%s", last, grepLines(a.Log(), src.SandboxID))
	}
	if _, err := ca.Connect(ctx, src.SandboxID, time.Minute); err != nil {
		t.Fatalf("resume after the kill mid-pause: %v", err)
	}
	checkContinues(t, ctx, conn, tok, n)
	if !committed && !strings.Contains(a.Log(), "a pause cut short by the daemon's death is finished") {
		t.Error("node a did not finish the pause its death cut short")
	}
	settled(t, ctx, ca, srv, nodes, []string{src.SandboxID})
}

// settled waits until the cluster lists exactly running (and no paused
// sandbox or snapshot), each node runs exactly the runsc sandboxes listed
// running there, and the bucket holds no image.
func settled(t *testing.T, ctx context.Context, c *client.Client, srv *s3test.Server, nodes map[string]*daemontest.Daemon, running []string) {
	t.Helper()
	var problem string
	ok := func() bool {
		list, _, err := c.ListSandboxes(ctx, client.ListOptions{State: []string{"running", "paused"}, Limit: 100})
		if err != nil {
			problem = err.Error()
			return false
		}
		per := map[string]int{}
		var ids []string
		for _, sb := range list {
			ids = append(ids, sb.SandboxID)
			if sb.State == "running" {
				per[sb.ClientID]++
			}
		}
		slices.Sort(ids)
		for _, id := range slices.Sorted(maps.Keys(nodes)) {
			containers := map[string]bool{}
			for _, p := range gvisor.RunscProcesses(filepath.Join(nodes[id].DataDir, "runtime", "runsc")) {
				containers[p.Container] = true
			}
			if len(containers) != per[id] {
				problem = fmt.Sprintf("node %s runs %d runsc sandboxes, lists %d running", id, len(containers), per[id])
				return false
			}
		}
		if !slices.Equal(ids, running) {
			problem = "listed " + strings.Join(ids, ",") + ", want " + strings.Join(running, ",")
			return false
		}
		if keys := objects(t, srv, "cluster/images/"); len(keys) > 0 {
			problem = "images in the bucket: " + strings.Join(keys, ",")
			return false
		}
		problem = ""
		return true
	}
	deadline := time.Now().Add(time.Minute)
	for !ok() && time.Now().Before(deadline) {
		time.Sleep(500 * time.Millisecond)
	}
	if problem != "" {
		t.Fatalf("the cluster did not settle: %s", problem)
	}
}
