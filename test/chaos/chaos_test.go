// Package chaos races lifecycle operations on a few sandboxes and user
// templates of a real daemon (real runsc) while the daemon is kill -9'd and
// restarted at random points, and then accounts for everything on the
// host: each runsc process, network namespace, cgroup, nftables element,
// image, content entry (layer, template image), OCI blob and event log
// belongs to a sandbox, snapshot or template the daemon lists, and each
// listed one exists.
//
// The run is seeded: the seed is logged, and FORKBOX_CHAOS_SEED=<seed>
// replays the same choices (timing still differs, so a race may need a few
// runs). FORKBOX_CHAOS_ROUNDS changes the number of rounds (default 200).
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
	r := &run{t: t, d: d, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), start: time.Now()}
	r.connect()
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
	t.Logf("chaos: %d of %d rounds in %s, %d daemon kills; ops: %v", n, rounds, elapsed.Round(time.Millisecond), r.kills, r.stats.summary())
	if n < rounds {
		t.Errorf("chaos: the %s budget cut the run to %d of %d rounds", budget, n, rounds)
	}
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
	t     *testing.T
	d     *daemontest.Daemon
	c     *client.Client
	rng   *rand.Rand // only the round's goroutine draws from it
	kills int
	stats stats
	// start is when the run began; pids are its daemons' process ids, one
	// per start (template.go).
	start time.Time
	pids  []int
}

// connect makes the client of the daemon just (re)started.
func (r *run) connect() {
	r.c = client.New(r.d.URL, r.d.APIKey)
	r.pids = append(r.pids, r.d.Pid())
}

// round starts one to three operations at once on random targets and, now
// and then, kill -9s the daemon while they run and restarts it.
func (r *run) round(n int) {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	live := r.live(ctx)
	snaps := r.snapshots(ctx)
	tpls := r.userTemplates(ctx)
	var wg sync.WaitGroup
	for range 1 + r.rng.IntN(3) {
		op := r.pick(live, snaps, tpls)
		wg.Go(func() { r.stats.add(op.name, op.do(ctx, r.c)) })
	}
	if r.rng.IntN(12) == 0 {
		time.Sleep(time.Duration(r.rng.IntN(400)) * time.Millisecond)
		r.d.Kill9()
		r.kills++
		wg.Wait()
		r.d.Restart()
		r.connect()
		r.t.Logf("round %d: daemon killed with SIGKILL and restarted", n)
		return
	}
	wg.Wait()
}

// live lists the running and paused sandboxes (nil if the daemon does not
// answer).
func (r *run) live(ctx context.Context) []client.SandboxInfo {
	list, _, err := r.c.ListSandboxes(ctx, client.ListOptions{State: []string{"running", "paused"}})
	if err != nil {
		r.t.Logf("list sandboxes: %v", err)
	}
	return list
}

// snapshots lists the snapshots (nil if the daemon does not answer).
func (r *run) snapshots(ctx context.Context) []client.SnapshotInfo {
	list, _, err := r.c.ListSnapshots(ctx, client.SnapshotListOptions{})
	if err != nil {
		r.t.Logf("list snapshots: %v", err)
	}
	return list
}
