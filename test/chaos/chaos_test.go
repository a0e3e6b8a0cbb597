// Package chaos races lifecycle operations on a few sandboxes and user
// templates of a real daemon (real runsc) while the daemon is kill -9'd and
// restarted at random points, and then accounts for everything on the
// host: each runsc process, network namespace, cgroup, nftables element,
// image, content entry (layer, template image), OCI blob and event log
// belongs to a sandbox, snapshot or template the daemon lists, and each
// listed one exists.
//
// TestChaosCluster does the same on a cluster (cluster_test.go): two
// nodes on one PostgreSQL database and one bucket, operations sent to
// either node, node kills and database restarts, each node's host and the
// bucket accounted for.
//
// The run is seeded: the seed is logged, and FORKBOX_CHAOS_SEED=<seed>
// replays the same choices (timing still differs, so a race may need a few
// runs). FORKBOX_CHAOS_ROUNDS changes the number of rounds (default 200;
// 80 for the cluster).
package chaos

import (
	"context"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/forkbox/forkbox/client"
	"github.com/forkbox/forkbox/internal/daemon/daemontest"
	"github.com/forkbox/forkbox/internal/oci/ocitest"
)

// Bounds of one run: CI has 2 cores and must stay fast.
const (
	defaultRounds = 200
	// budget bounds the rounds on a slow machine: 200 took 83 s on a
	// loaded 2-core host, so a run cut short by it fails (the accounting
	// still runs) rather than passing with fewer rounds.
	budget = 10 * time.Minute
	// maxLive caps the sandboxes (running or paused) the run keeps.
	maxLive = 4
	// maxSnapshots caps the snapshots the run keeps.
	maxSnapshots = 3
	// opTimeout bounds one operation.
	opTimeout = 30 * time.Second
	// accountEvery rounds, the daemon is stopped with SIGTERM and the host
	// accounted for, then restarted.
	accountEvery = 50
)

// TestChaos is the chaos run with accounting.
func TestChaos(t *testing.T) {
	seed, rounds := seedAndRounds(t)
	t.Logf("chaos seed %d, %d rounds (replay: FORKBOX_CHAOS_SEED=%d)", seed, rounds, seed)
	reg := ocitest.Registry(t)
	ocitest.Push(t, ocitest.Host(reg), "fbx/busybox:1", v1.Config{Env: []string{"PATH=/bin"}, Cmd: []string{"sh"}},
		[]v1.Layer{ocitest.BusyboxLayer(t, nil)})
	d := daemontest.Start(t, daemontest.Options{StrictStop: true, ExtraArgs: []string{
		// The pool and standby containers are what a stopping or crashing
		// daemon has been seen to leak: keep them in play.
		"--pool-size", "1", "--standby", "1",
		// User templates from a loopback registry; no pulled blob is kept
		// once unpacked, so every blob on disk is a leak.
		"--registry-mirror", "docker.io=" + reg, "--oci-blob-cache", "0",
	}})
	r := newRun(t, seed, []*node{{index: daemontest.NetworkIndex(), d: d}})
	n, elapsed := r.rounds(rounds, budget)
	t.Logf("chaos: %d of %d rounds in %s, %d daemon kills; ops: %v", n, rounds, elapsed.Round(time.Millisecond), r.kills, r.stats.summary())
}

// newRun makes the run of seed on nodes, their daemons started.
func newRun(t *testing.T, seed uint64, nodes []*node) *run {
	r := &run{t: t, nodes: nodes, lastFault: -10, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), start: time.Now()}
	for _, n := range nodes {
		r.connect(n)
	}
	return r
}

// rounds runs up to rounds rounds within budget, accounting every
// accountEvery and after the last, then empties the run. It returns the
// rounds run and how long they took; a run the budget cut short fails.
func (r *run) rounds(rounds int, budget time.Duration) (int, time.Duration) {
	start := time.Now()
	n := 0
	for ; n < rounds && time.Since(start) < budget; n++ {
		r.round(n)
		if (n+1)%accountEvery == 0 {
			r.account(n)
		}
	}
	elapsed := time.Since(start)
	if n%accountEvery != 0 {
		r.account(n)
	}
	r.empty()
	if n < rounds {
		r.t.Errorf("chaos: the %s budget cut the run to %d of %d rounds", budget, n, rounds)
	}
	return n, elapsed
}

// seedAndRounds reads FORKBOX_CHAOS_SEED and FORKBOX_CHAOS_ROUNDS.
func seedAndRounds(t *testing.T) (uint64, int) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("FORKBOX_CHAOS_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("FORKBOX_CHAOS_SEED: %v", err)
		}
		seed = v
	}
	rounds := defaultRounds
	if s := os.Getenv("FORKBOX_CHAOS_ROUNDS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 {
			t.Fatalf("FORKBOX_CHAOS_ROUNDS: %q", s)
		}
		rounds = v
	}
	return seed, rounds
}

// run is one chaos run's state.
type run struct {
	t *testing.T
	// nodes are the run's daemons: one, or a cluster's nodes.
	nodes []*node
	// cl is the cluster's shared database and bucket (nil for one daemon
	// on SQLite and its disk).
	cl    *cluster
	rng   *rand.Rand // only the round's goroutine draws from it
	kills int
	// lastFault is the last round with a kill or a database restart.
	lastFault int
	// losses counts the kills whose node's sandboxes were lost, dbRestarts
	// the database's restarts.
	losses, dbRestarts int
	// failures are the accounting's failures not yet traced in the logs.
	failures []string
	stats    stats
	// start is when the run began; pids are its daemons' process ids, one
	// per start (template.go).
	start time.Time
	pids  []int
}

// round starts one to three operations at once on random targets, each
// sent to a random node, and, now and then, kill -9s a node while they run
// and restarts it (or, in a cluster, restarts the database under them).
func (r *run) round(n int) {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	live := r.live(ctx)
	snaps := r.snapshots(ctx)
	tpls := r.userTemplates(ctx)
	var wg sync.WaitGroup
	ops := make([]op, 1+r.rng.IntN(3))
	errs := make([]error, len(ops))
	for i := range ops {
		ops[i] = r.pick(live, snaps, tpls)
		c := r.anyNode().c
		wg.Go(func() { errs[i] = ops[i].do(ctx, c) })
	}
	switch {
	case r.cl != nil && r.rng.IntN(dbRestartOdds) == 0:
		r.lastFault = n
		r.restartDatabase(n, &wg)
	case r.rng.IntN(12) == 0:
		r.lastFault = n
		time.Sleep(time.Duration(r.rng.IntN(400)) * time.Millisecond)
		nd := r.anyNode()
		nd.d.Kill9()
		r.kills++
		wg.Wait()
		lost := r.maybeLose(nd)
		nd.d.Restart()
		r.connect(nd)
		r.t.Logf("round %d: %s killed with SIGKILL and restarted%s", n, nd, lost)
	}
	wg.Wait()
	for i, o := range ops {
		// A fault's aftermath (a pool's broken connections) outlasts its
		// round by one.
		r.stats.add(o.name, errs[i], r.lastFault >= n-1)
	}
}

// live lists the running and paused sandboxes (nil if the daemon does not
// answer).
func (r *run) live(ctx context.Context) []client.SandboxInfo {
	list, _, err := r.api().ListSandboxes(ctx, client.ListOptions{State: []string{"running", "paused"}})
	if err != nil {
		r.t.Logf("list sandboxes: %v", err)
	}
	return list
}

// snapshots lists the snapshots (nil if the daemon does not answer).
func (r *run) snapshots(ctx context.Context) []client.SnapshotInfo {
	list, _, err := r.api().ListSnapshots(ctx, client.SnapshotListOptions{})
	if err != nil {
		r.t.Logf("list snapshots: %v", err)
	}
	return list
}
