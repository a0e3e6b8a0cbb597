package chaos

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/forkbox/forkbox/client"
	"github.com/forkbox/forkbox/internal/daemon/daemontest"
	"github.com/forkbox/forkbox/internal/images/s3test"
	"github.com/forkbox/forkbox/internal/oci/ocitest"
	"github.com/forkbox/forkbox/internal/store"
	"github.com/forkbox/forkbox/internal/store/pgtest"
)

// Bounds of a cluster run: two daemons on CI's 2 cores.
const (
	defaultClusterRounds = 80
	clusterBudget        = 6 * time.Minute
	// dbRestartOdds: one round in that many restarts the database under
	// its operations.
	dbRestartOdds = 15
	// bucketPrefix is the cluster's prefix in the bucket.
	bucketPrefix = "cluster"
)

// cluster is TestChaosCluster's shared state: one PostgreSQL database and
// one bucket for both nodes.
type cluster struct {
	pg  *pgtest.Server
	url string
	// st is the test's own connection to the records (the volumes' nodes,
	// the content the records name).
	st  *store.Store
	srv *s3test.Server
	// host is the host name the nodes' reference markers start with.
	host string
}

// TestChaosCluster is the chaos run on a cluster: node-a and node-b on one
// PostgreSQL database and one bucket, each operation sent to either node
// (any node answers for every sandbox), a random node kill -9'd now and
// then (restarted at once, or once its lease ran out and its running
// sandboxes were lost), the database restarted under the operations now
// and then; then each node's host is accounted for against the sandboxes
// listed on it, and the bucket's images, content and references against
// the records. FORKBOX_CHAOS_SEED and FORKBOX_CHAOS_ROUNDS (default 80)
// work as for TestChaos.
func TestChaosCluster(t *testing.T) {
	seed, rounds := seedAndRounds(t)
	if os.Getenv("FORKBOX_CHAOS_ROUNDS") == "" {
		rounds = defaultClusterRounds
	}
	t.Logf("chaos cluster seed %d, %d rounds (replay: FORKBOX_CHAOS_SEED=%d)", seed, rounds, seed)
	cl, nodes := startCluster(t)
	r := newRun(t, seed, nodes)
	r.cl = cl
	n, elapsed := r.rounds(rounds, clusterBudget)
	t.Logf("chaos cluster: %d of %d rounds in %s, %d node kills (%d lost their sandboxes), %d database restarts; ops: %v",
		n, rounds, elapsed.Round(time.Millisecond), r.kills, r.losses, r.dbRestarts, r.stats.summary())
	t.Logf("chaos cluster: the first error of each operation and outcome:\n%s", r.stats.firstErrors())
}

// startCluster starts the database, the bucket, the registry and both
// nodes (at once).
func startCluster(t *testing.T) (*cluster, []*node) {
	reg := ocitest.Registry(t)
	ocitest.Push(t, ocitest.Host(reg), "fbx/busybox:1", v1.Config{Env: []string{"PATH=/bin"}, Cmd: []string{"sh"}},
		[]v1.Layer{ocitest.BusyboxLayer(t, nil)})
	cl := &cluster{pg: pgtest.Start(t), srv: s3test.Start(t)}
	cl.host, _ = os.Hostname()
	cl.url = cl.pg.NewDatabase(t)
	st, err := store.OpenURL(context.Background(), cl.url)
	if err != nil {
		t.Fatalf("open the cluster's records: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	cl.st = st
	// Node a has the test process's own index, node b one reserved for it:
	// no other test process's daemon shares either (daemontest).
	nodes := []*node{{id: "node-a", index: daemontest.NetworkIndex()}, {id: "node-b", index: daemontest.ReserveIndex(t)}}
	for _, n := range nodes {
		t.Cleanup(func() { exec.Command("nft", "delete", "table", "inet", fmt.Sprintf("forkbox%d", n.index)).Run() })
	}
	var wg sync.WaitGroup
	for i, n := range nodes {
		args := []string{"--database", cl.url, "--node-id", n.id, "--object-store", cl.srv.URL(bucketPrefix),
			"--image-cache-size", "8GiB", "--node-heartbeat", "200ms", "--node-lease", "2s",
			"--network-index", fmt.Sprint(n.index),
			"--registry-mirror", "docker.io=" + reg, "--oci-blob-cache", "0"}
		if i == 0 {
			// Node a keeps a pool and a standby in play (as TestChaos);
			// node b, none: two of each would crowd 2 cores.
			args = append(args, "--pool-size", "1", "--standby", "1")
		}
		wg.Go(func() {
			n.d = daemontest.Start(t, daemontest.Options{StrictStop: true, ExtraArgs: args, Env: cl.srv.Env()})
		})
	}
	wg.Wait()
	for _, n := range nodes {
		if n.d == nil {
			t.Fatal("a node did not start")
		}
	}
	return cl, nodes
}

// restartDatabase stops the database while the round's operations run and
// starts it again after up to 2.5 s (past the nodes' 2 s lease: no node
// may declare another dead for it), then waits for the operations.
func (r *run) restartDatabase(n int, ops *sync.WaitGroup) {
	time.Sleep(time.Duration(r.rng.IntN(400)) * time.Millisecond)
	down := time.Duration(r.rng.IntN(2500)) * time.Millisecond
	r.cl.pg.Stop()
	time.Sleep(down)
	if err := r.cl.pg.Restart(); err != nil {
		r.t.Fatalf("round %d: restart the database: %v", n, err)
	}
	r.dbRestarts++
	ops.Wait()
	r.t.Logf("round %d: database stopped for %s and restarted", n, down)
}

// maybeLose, half the time, waits (at most 20 s) until the other node
// lists killed node nd dead and none of its sandboxes running (they were
// lost), so that nd's restart finds them recorded killed. It says what
// happened, for the log.
func (r *run) maybeLose(nd *node) string {
	if r.cl == nil || r.rng.IntN(2) == 0 {
		return ""
	}
	var other *node
	for _, o := range r.nodes {
		if o != nd {
			other = o
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for ; ctx.Err() == nil; time.Sleep(200 * time.Millisecond) {
		info, err := other.c.GetNode(ctx, nd.id)
		if err != nil || info.State != client.NodeDead {
			continue
		}
		sbs, _, err := other.c.ListSandboxes(ctx, client.ListOptions{State: []string{"running"}, Limit: 100})
		if err != nil {
			continue
		}
		running := 0
		for _, sb := range sbs {
			if sb.ClientID == nd.id {
				running++
			}
		}
		if running == 0 {
			r.losses++
			return " once its lease ran out and its running sandboxes were lost"
		}
	}
	r.t.Errorf("%s killed: after 20 s %s still lists it alive or its sandboxes running", nd, other)
	return " (not declared dead in 20 s)"
}

// volumeNodes maps each volume to its node, from the cluster's records
// (nil for one daemon).
func (r *run) volumeNodes(ctx context.Context) map[string]string {
	if r.cl == nil {
		return nil
	}
	vols, err := r.cl.st.ListVolumes(ctx)
	if err != nil {
		r.t.Fatalf("list volume records: %v", err)
	}
	out := map[string]string{}
	for _, v := range vols {
		out[v.ID] = v.Node
	}
	return out
}
