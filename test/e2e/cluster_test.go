package e2e

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/forkbox/forkbox/internal/daemon/daemontest"
	"github.com/forkbox/forkbox/internal/images/s3test"
	"github.com/forkbox/forkbox/internal/oci/ocitest"
	"github.com/forkbox/forkbox/internal/store/pgtest"
)

// TestCluster runs js/cluster.mjs (the unmodified npm SDK, given node a's
// URL only) against three nodes on a real PostgreSQL and a real S3 server
// (SeaweedFS), all started here: creates spread over the nodes, a pause on
// one node resumed through another, a strict clone spread over nodes, a
// template built on one node used on the others, and node c killed with
// SIGKILL — its running sandboxes lost, its paused one resumed elsewhere.
// Node c, restarted, removes the containers it left.
func TestCluster(t *testing.T) {
	dir := jsDir(t)
	reg := ocitest.Registry(t)
	pushBusybox(t, ocitest.Host(reg))
	url := pgtest.Start(t).NewDatabase(t)
	srv := s3test.Start(t)
	ids := []string{"node-a", "node-b", "node-c"}
	nodes := make([]*daemontest.Daemon, 3)
	var wg sync.WaitGroup
	for i, id := range ids {
		index := daemontest.ReserveIndex(t)
		wg.Add(1)
		go func() {
			defer wg.Done()
			nodes[i] = startNode(t, id, index, url, srv, "--registry-mirror", "docker.io="+reg)
		}()
	}
	wg.Wait()
	for i, d := range nodes {
		if d == nil {
			t.Fatalf("%s did not start", ids[i])
		}
	}
	urls := map[string]string{}
	for i, d := range nodes {
		urls[ids[i]] = d.URL
	}
	js, _ := json.Marshal(urls)
	c := nodes[2]
	env := append(clientEnv(nodes[0]), "FBX_NODES="+string(js), fmt.Sprintf("FBX_NODE_C_PID=%d", c.Pid()),
		"FBX_IMAGE=docker.io/fbx/busybox:1")
	// Node c, killed by the script, is started again whatever the script
	// did, so it removes what it left (a dead daemon's sandboxes are not
	// found by the test's clean-up).
	defer func() {
		if !gone(c.Pid()) {
			return
		}
		c.Restart()
		if !strings.Contains(c.Log(), "removing orphan runtime sandbox") {
			t.Errorf("node c, restarted, did not remove the containers of its lost sandboxes")
		}
	}()
	runNode(t, dir, env, "--test", "--test-concurrency=1", "--test-reporter=spec", filepath.Join(dir, "cluster.mjs"))
}

// gone reports whether process pid has exited (and been reaped), waiting
// up to 10 s for it.
func gone(pid int) bool {
	for range 100 {
		if syscall.Kill(pid, 0) != nil {
			return true
		}
		time.Sleep(100 * time.Millisecond)
	}
	return false
}

// startNode starts cluster node id on the database url and srv's bucket,
// with its own network index and data dir.
func startNode(t *testing.T, id string, index int, url string, srv *s3test.Server, extra ...string) *daemontest.Daemon {
	t.Helper()
	args := append(serveArgs(t), "--database", url, "--node-id", id, "--object-store", srv.URL("cluster"),
		"--image-cache-size", "4GiB", "--node-heartbeat", "500ms", "--node-lease", "3s",
		"--network-index", fmt.Sprint(index))
	t.Cleanup(func() { exec.Command("nft", "delete", "table", "inet", fmt.Sprintf("forkbox%d", index)).Run() })
	return daemontest.Start(t, daemontest.Options{DataDir: dataDir(t), ExtraArgs: append(args, extra...), Env: srv.Env()})
}
