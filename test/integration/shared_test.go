package integration

import (
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/forkbox/forkbox/client"
	"github.com/forkbox/forkbox/internal/daemon/daemontest"
	"github.com/forkbox/forkbox/internal/images/s3test"
	"github.com/forkbox/forkbox/internal/store/pgtest"
)

// startShared starts node (env added to its environment) on the
// PostgreSQL database url with its images in srv's bucket under the
// cluster's one prefix, with the tests' node flags (nodeArgs); index > 0
// gives it its own network.
func startShared(t *testing.T, url string, srv *s3test.Server, node string, index int, env ...string) *daemontest.Daemon {
	return startClusterNode(t, url, srv, node, index, nodeArgs, env...)
}

// startClusterNode is startShared with extra flags of the caller's
// instead of nodeArgs.
func startClusterNode(t testing.TB, url string, srv *s3test.Server, node string, index int, extra []string, env ...string) *daemontest.Daemon {
	args := append([]string{"--database", url, "--node-id", node, "--object-store", srv.URL("cluster"),
		"--image-cache-size", "8GiB"}, extra...)
	if index > 0 {
		args = append(args, "--network-index", fmt.Sprint(index))
		t.Cleanup(func() { exec.Command("nft", "delete", "table", "inet", fmt.Sprintf("forkbox%d", index)).Run() })
	}
	return daemontest.Start(t, daemontest.Options{ExtraArgs: args, Env: append(srv.Env(), env...)})
}

// startTrio starts node-a, node-b and node-c at once on one PostgreSQL
// database and one bucket.
func startTrio(t *testing.T) (a, b, c *daemontest.Daemon) {
	url := pgtest.Start(t).NewDatabase(t)
	srv := s3test.Start(t)
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { defer wg.Done(); a = startShared(t, url, srv, "node-a", 0) }()
	ib, ic := secondIndex(t), secondIndex(t)
	go func() { defer wg.Done(); b = startShared(t, url, srv, "node-b", ib) }()
	go func() { defer wg.Done(); c = startShared(t, url, srv, "node-c", ic) }()
	wg.Wait()
	if a == nil || b == nil || c == nil {
		t.Fatal("a daemon did not start")
	}
	return a, b, c
}

// startSharedPair starts node-a (with aArgs before the tests' node flags)
// and node-b (with bEnv in its environment) at once on one PostgreSQL
// database and one bucket.
func startSharedPair(t *testing.T, aArgs []string, bEnv ...string) (a, b *daemontest.Daemon) {
	url := pgtest.Start(t).NewDatabase(t)
	srv := s3test.Start(t)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		a = startClusterNode(t, url, srv, "node-a", 0, slices.Concat(aArgs, nodeArgs))
	}()
	ib := secondIndex(t)
	go func() { defer wg.Done(); b = startShared(t, url, srv, "node-b", ib, bEnv...) }()
	wg.Wait()
	if a == nil || b == nil {
		t.Fatal("a daemon did not start")
	}
	return a, b
}

// TestSharedImages: three nodes sharing one database and one bucket move
// paused work between them. A drained node hands its paused sandbox to
// another, which resumes it with its memory; a snapshot taken on one node
// starts a sandbox on another; a dead node's paused sandbox is taken over
// by exactly one of two nodes asked for it at once, memory intact; a
// node's restart does not sweep away another node's pause image; a
// sandbox rolls back on one node to a snapshot taken of it on another.
func TestSharedImages(t *testing.T) {
	ctx := daemontest.Context(t)
	a, b, c := startTrio(t)
	key := a.APIKey
	ca, cb, cc := client.New(a.URL, key), client.New(b.URL, key), client.New(c.URL, key)
	drain := func(cl *client.Client, node string, on bool) {
		t.Helper()
		var err error
		if on {
			_, err = cl.DrainNode(ctx, node)
		} else {
			_, err = cl.UndrainNode(ctx, node)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	owner := func(id string) string {
		t.Helper()
		info, err := ca.GetSandbox(ctx, id)
		if err != nil {
			t.Fatalf("get %s: %v", id, err)
		}
		return info.ClientID
	}
	drain(ca, "node-a", true)
	drain(ca, "node-c", true)

	// On node b: a sandbox with a file and a process, paused; a snapshot.
	sb1 := create(t, ctx, cb, client.CreateOptions{})
	if o := owner(sb1.SandboxID); o != "node-b" {
		t.Fatalf("created on %s with nodes a and c drained", o)
	}
	conn1 := ca.Conn(sb1.SandboxID, sb1.EnvdAccessToken)
	sh(t, ctx, conn1, "echo one > /tmp/f; nohup sleep 1001 >/dev/null 2>&1 &")
	// Taken on b; sb1 rolls back to it at the end, on node a.
	snap1, err := cb.Snapshot(ctx, sb1.SandboxID, "")
	if err != nil {
		t.Fatal(err)
	}
	snapSrc := create(t, ctx, cb, client.CreateOptions{})
	writeFile(t, ctx, ca.Conn(snapSrc.SandboxID, snapSrc.EnvdAccessToken), "/tmp/snap", "from b")
	snap, err := cb.Snapshot(ctx, snapSrc.SandboxID, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := cb.KillSandbox(ctx, snapSrc.SandboxID); err != nil {
		t.Fatal(err)
	}
	pause(t, ctx, ca, b, sb1.SandboxID)

	// Drained, node b hands its paused sandbox to node a (c is drained).
	drain(ca, "node-a", false)
	drain(ca, "node-b", true)
	waitFor(t, 20*time.Second, func() bool { return owner(sb1.SandboxID) == "node-a" })
	if !strings.Contains(b.Log(), "handed a paused sandbox to another node") {
		t.Error("node b did not log the hand-over")
	}
	// The snapshot taken on b starts a sandbox on a (b and c drained).
	fromSnap := create(t, ctx, cb, client.CreateOptions{TemplateID: snap.SnapshotID})
	if o := owner(fromSnap.SandboxID); o != "node-a" {
		t.Errorf("sandbox from node b's snapshot created on %s, want node-a", o)
	}
	if got := readFile(t, ctx, cb.Conn(fromSnap.SandboxID, fromSnap.EnvdAccessToken), "/tmp/snap"); got != "from b" {
		t.Errorf("file of node b's snapshot on node a: %q", got)
	}
	// Resumed through node b, the handed-over sandbox runs on a as it was.
	if _, err := cb.Connect(ctx, sb1.SandboxID, time.Minute); err != nil {
		t.Fatalf("resume of the handed-over sandbox: %v", err)
	}
	checkKept(t, ctx, conn1, "one", "1001")

	// Node c's paused sandbox, c killed: a and b are asked for it at once.
	drain(ca, "node-c", false)
	drain(ca, "node-a", true)
	sb3 := create(t, ctx, cc, client.CreateOptions{})
	if o := owner(sb3.SandboxID); o != "node-c" {
		t.Fatalf("created on %s with nodes a and b drained", o)
	}
	conn3 := ca.Conn(sb3.SandboxID, sb3.EnvdAccessToken)
	sh(t, ctx, conn3, "echo three > /tmp/f; nohup sleep 1003 >/dev/null 2>&1 &")
	pause(t, ctx, ca, c, sb3.SandboxID)
	drain(ca, "node-a", false)
	drain(ca, "node-b", false)
	c.Kill9()
	waitFor(t, 15*time.Second, func() bool { n, err := ca.GetNode(ctx, "node-c"); return err == nil && n.State == client.NodeDead })
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, cl := range []*client.Client{ca, cb} {
		wg.Add(1)
		go func() { defer wg.Done(); _, errs[i] = cl.Connect(ctx, sb3.SandboxID, time.Minute) }()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil && !isStatus(err, 409) {
			t.Errorf("racing resume %d: %v, want success or 409", i, err)
		}
	}
	if errs[0] != nil && errs[1] != nil {
		t.Fatalf("neither racing resume won: %v", errs)
	}
	took := strings.Count(a.Log(), "took over a paused sandbox") + strings.Count(b.Log(), "took over a paused sandbox")
	t.Logf("racing resumes through a and b: %v; taken over by %s", errs, owner(sb3.SandboxID))
	if o := owner(sb3.SandboxID); took != 1 || (o != "node-a" && o != "node-b") {
		t.Errorf("dead node c's sandbox: taken over %d times, now on %s; want once, by a or b", took, o)
	}
	checkKept(t, ctx, conn3, "three", "1003")

	// Node a's sandbox paused, node b restarted: b's start-up sweep
	// keeps a's pause image, and a resumes from it.
	if o := owner(sb1.SandboxID); o != "node-a" {
		t.Fatalf("sb1 on %s", o)
	}
	pause(t, ctx, cb, a, sb1.SandboxID)
	b.Terminate()
	b.Restart()
	if strings.Contains(b.Log(), "removed orphan image") {
		t.Errorf("node b's restart swept images:\n%s", grepLines(b.Log(), "removed orphan image"))
	}
	if _, err := cb.Connect(ctx, sb1.SandboxID, time.Minute); err != nil {
		t.Fatalf("resume of node a's sandbox after node b's restart: %v", err)
	}
	checkKept(t, ctx, conn1, "one", "1001")

	// Rolled back on node a to the snapshot taken on node b: its files
	// and processes as they were then, still on a.
	if got := sh(t, ctx, conn1, "echo changed > /tmp/f; pkill -x sleep; sleep 0.2; cat /tmp/f; pgrep -x sleep || echo none"); got != "changed\nnone" {
		t.Fatalf("before the rollback: %q", got)
	}
	if _, err := cc.Rollback(ctx, sb1.SandboxID, snap1.SnapshotID); err == nil {
		t.Error("rollback through dead node c answered")
	}
	if _, err := cb.Rollback(ctx, sb1.SandboxID, snap1.SnapshotID); err != nil {
		t.Fatalf("rollback on node a to node b's snapshot: %v", err)
	}
	checkKept(t, ctx, conn1, "one", "1001")
	if o := owner(sb1.SandboxID); o != "node-a" {
		t.Errorf("sb1 on %s after its rollback, want node-a", o)
	}
}

// pause pauses sandbox id through cl and waits until its node d says so.
func pause(t *testing.T, ctx context.Context, cl *client.Client, d *daemontest.Daemon, id string) {
	t.Helper()
	before := strings.Count(d.Log(), "sandbox paused")
	if err := cl.Pause(ctx, id); err != nil {
		t.Fatalf("pause %s: %v", id, err)
	}
	waitFor(t, 30*time.Second, func() bool { return strings.Count(d.Log(), "sandbox paused") > before })
}

// checkKept checks a resumed sandbox still has its file /tmp/f and its
// process sleep <arg>.
func checkKept(t *testing.T, ctx context.Context, conn *client.SandboxConn, file, arg string) {
	t.Helper()
	got := sh(t, ctx, conn, "cat /tmp/f; pgrep -f 'sleep "+arg+"' >/dev/null && echo sleeping")
	if got != file+"\nsleeping" {
		t.Errorf("after the move: %q, want the file (%s) and the process", got, file)
	}
}

// grepLines keeps the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestClusterClone: a clone on one node of a cluster sharing its images
// starts its copies on the nodes placement picks, each with the source's
// files and memory. strict is all-or-nothing across nodes: a copy that
// fails on node b (an injected restore fault) takes the copies already
// started with it, on both nodes. A drained node may clone: its copies
// start elsewhere.
func TestClusterClone(t *testing.T) {
	ctx := daemontest.Context(t)
	a, b := startSharedPair(t, nil, "FORKBOX_FAULTS=restore=2")
	ca, cb := client.New(a.URL, a.APIKey), client.New(b.URL, a.APIKey)
	if _, err := ca.DrainNode(ctx, "node-b"); err != nil {
		t.Fatal(err)
	}
	src := create(t, ctx, cb, client.CreateOptions{}) // placed on a
	if info, err := cb.GetSandbox(ctx, src.SandboxID); err != nil || info.ClientID != "node-a" {
		t.Fatalf("source: %+v %v, want it on node-a", info, err)
	}
	conn := cb.Conn(src.SandboxID, src.EnvdAccessToken)
	sh(t, ctx, conn, "echo src > /tmp/f; nohup sleep 1005 >/dev/null 2>&1 &")
	if _, err := cb.UndrainNode(ctx, "node-b"); err != nil {
		t.Fatal(err)
	}
	if _, err := ca.DrainNode(ctx, "node-a"); err != nil {
		t.Fatal(err)
	}
	// Node a drained: all three copies go to b, whose second restore fails.
	if _, err := cb.Clone(ctx, src.SandboxID, client.CloneOptions{Count: 3, Strict: true}); err == nil {
		t.Fatal("strict clone with a failing copy on node b succeeded")
	}
	running := func() []string {
		list, _, err := ca.ListSandboxes(ctx, client.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, sb := range list {
			ids = append(ids, sb.SandboxID+"@"+sb.ClientID)
		}
		return ids
	}
	if ids := running(); len(ids) != 1 {
		t.Errorf("after the failed strict clone: listed %v, want only the source", ids)
	}
	made := regexp.MustCompile(`sandbox created as a clone" sandbox=(\w+)`).FindAllStringSubmatch(b.Log(), -1)
	if len(made) == 0 {
		t.Error("node b started no copy of the strict clone")
	}
	for _, m := range made {
		if !strings.Contains(b.Log(), `msg="sandbox killed" sandbox=`+m[1]) {
			t.Errorf("copy %s that node b started for the failed strict clone was not killed", m[1])
		}
	}
	if _, err := ca.UndrainNode(ctx, "node-a"); err != nil {
		t.Fatal(err)
	}
	res, err := cb.Clone(ctx, src.SandboxID, client.CloneOptions{Count: 4, Strict: true})
	if err != nil {
		t.Fatalf("strict clone ×4 over two nodes: %v", err)
	}
	nodes := map[string]int{}
	for _, sb := range res.Sandboxes {
		info, err := ca.GetSandbox(ctx, sb.SandboxID)
		if err != nil {
			t.Fatal(err)
		}
		nodes[info.ClientID]++
		c := ca.Conn(sb.SandboxID, sb.EnvdAccessToken)
		if got := sh(t, ctx, c, "cat /tmp/f; pgrep -f 'sleep 1005' >/dev/null && echo sleeping"); got != "src\nsleeping" {
			t.Errorf("copy %s on %s: %q, want the source's file and process", sb.SandboxID, info.ClientID, got)
		}
	}
	if len(res.Sandboxes) != 4 || nodes["node-a"] == 0 || nodes["node-b"] == 0 {
		t.Errorf("copies per node: %v (%d copies), want four over both nodes", nodes, len(res.Sandboxes))
	}
}
