// Command commands measures what the E2B SDKs' commands.run costs: the
// round trip of `bash -l -c "echo hi"` (what commands.run("echo hi")
// sends) one after the other on one warm sandbox, and the same command sent
// at once to N live sandboxes (each latency measured from the common start).
// It prints a markdown section for docs/benchmarks.md.
//
// It starts its own daemon (<bin>/forkbox serve, as root) on a temporary
// data dir and its own sandbox network, and kills everything at the end.
//
//	go run ./bench/commands -bin ./bin -n 100
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/forkbox/forkbox/bench/benchd"
	"github.com/forkbox/forkbox/client"
)

type config struct {
	daemon benchd.Options
	n      int           // sandboxes for the concurrent round
	seq    int           // sequential round trips
	gap    time.Duration // pause between sequential round trips
	label  string        // what the report calls this build
	pool   int           // the daemon's --command-pool (-1: its default)
}

func main() {
	var c config
	c.daemon.Flags(13)
	flag.IntVar(&c.n, "n", 100, "live sandboxes that get one command each at the same time")
	flag.IntVar(&c.seq, "seq", 50, "sequential commands.run(\"echo hi\") round trips on one sandbox")
	flag.DurationVar(&c.gap, "gap", 20*time.Millisecond, "pause between two sequential round trips (a client reading the output)")
	flag.StringVar(&c.label, "label", "", "name of the build measured, for the report")
	flag.IntVar(&c.pool, "command-pool", -1, "the daemon's --command-pool (-1: leave its default; a build without the flag needs -1)")
	flag.Parse()
	benchd.Main("commands", func(ctx context.Context) error { return run(ctx, c) })
}

func run(ctx context.Context, c config) error {
	args := []string{"--pool-size", "0", "--max-sandboxes", strconv.Itoa(c.n + 10)}
	if c.pool >= 0 {
		args = append(args, "--command-pool", strconv.Itoa(c.pool))
	}
	d, err := benchd.Start(ctx, c.daemon.Named("commands", args...))
	if err != nil {
		return err
	}
	defer d.Stop()
	cl := client.New(d.URL, d.Key)
	// The sequential round trips first, with one sandbox live, then the
	// concurrent ones across all n.
	ids, err := createAll(ctx, cl, 1)
	defer func() { killAll(cl, ids) }()
	if err != nil {
		dumpLog(d.LogPath)
		return err
	}
	first, err := warm(ctx, cl, ids[0])
	if err != nil {
		return err
	}
	var r results
	if err := r.oneSandbox(ctx, c, first); err != nil {
		return err
	}
	more, err := createAll(ctx, cl, c.n-1)
	ids = append(ids, more...)
	if err != nil {
		dumpLog(d.LogPath)
		return err
	}
	conns := []*client.SandboxConn{first}
	for _, id := range more {
		conn, err := warm(ctx, cl, id)
		if err != nil {
			return err
		}
		conns = append(conns, conn)
	}
	time.Sleep(3 * time.Second)
	if r.concCPU, err = hostCPU(func() (err error) { r.conc, r.wall, err = concurrent(ctx, conns); return err }); err != nil {
		return err
	}
	time.Sleep(3 * time.Second) // pools refilled, metrics sampled
	if r.mem, err = meanMemUsed(ctx, cl, ids); err != nil {
		return err
	}
	report(c, r)
	return nil
}

// results are the bench's figures: latencies in ms, and the host's busy
// CPU time (every process) over each phase.
type results struct {
	seq, stat, conc          []float64
	wall, mem                float64
	seqCPU, statCPU, concCPU time.Duration
}

// oneSandbox measures the sequential round trips, with and without a
// process, in sandbox conn.
func (r *results) oneSandbox(ctx context.Context, c config, conn *client.SandboxConn) (err error) {
	if r.seqCPU, err = hostCPU(func() (err error) { r.seq, err = sequential(ctx, c, conn); return err }); err != nil {
		return err
	}
	r.statCPU, err = hostCPU(func() (err error) { r.stat, err = statRTT(ctx, c, conn); return err })
	return err
}

// hostCPU runs f and returns the host's busy CPU time meanwhile.
func hostCPU(f func() error) (time.Duration, error) {
	cpu0 := benchd.BusyCPU()
	err := f()
	return benchd.BusyCPU() - cpu0, err
}

// warm connects to a sandbox and runs a first command in it.
func warm(ctx context.Context, cl *client.Client, id string) (*client.SandboxConn, error) {
	sb, err := cl.Connect(ctx, id, 0)
	if err != nil {
		return nil, err
	}
	if err := echo(ctx, sb.Conn()); err != nil {
		return nil, err
	}
	time.Sleep(200 * time.Millisecond) // the agent settles (and refills its pool)
	return sb.Conn(), nil
}

// dumpLog copies the end of the daemon's log to stderr.
func dumpLog(path string) {
	if log, err := os.ReadFile(path); err == nil {
		os.Stderr.Write(log[max(0, len(log)-4000):])
	}
}

func createAll(ctx context.Context, cl *client.Client, n int) ([]string, error) {
	var ids []string
	for i := range n {
		sb, err := cl.CreateSandbox(ctx, client.CreateOptions{TemplateID: "base", Timeout: 15 * time.Minute})
		if err != nil {
			return ids, fmt.Errorf("create #%d: %w", i+1, err)
		}
		ids = append(ids, sb.SandboxID)
		if (i+1)%20 == 0 {
			slog.Info("created", "n", i+1)
		}
	}
	return ids, nil
}

func killAll(cl *client.Client, ids []string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, id := range ids {
		_ = cl.KillSandbox(ctx, id)
	}
}

// echo runs what commands.run("echo hi") sends and checks its output.
func echo(ctx context.Context, conn *client.SandboxConn) error {
	var out syncBuf
	code, err := conn.Exec(ctx, client.ExecOptions{Cmd: []string{"/bin/bash", "-l", "-c", "echo hi"}, Stdout: &out})
	if err == nil && (code != 0 || out.String() != "hi\n") {
		err = fmt.Errorf("echo: exit %d, output %q", code, out.String())
	}
	return err
}

func sequential(ctx context.Context, c config, conn *client.SandboxConn) ([]float64, error) {
	var ms []float64
	for i := range c.seq + 3 {
		time.Sleep(c.gap)
		t0 := time.Now()
		if err := echo(ctx, conn); err != nil {
			return nil, err
		}
		if i >= 3 {
			ms = append(ms, benchd.MS(time.Since(t0)))
		}
	}
	return ms, nil
}

// statRTT is the same path without a process: proxy and agent RPC alone.
func statRTT(ctx context.Context, c config, conn *client.SandboxConn) ([]float64, error) {
	var ms []float64
	for range c.seq {
		time.Sleep(c.gap)
		t0 := time.Now()
		if _, err := conn.Stat(ctx, "/"); err != nil {
			return nil, err
		}
		ms = append(ms, benchd.MS(time.Since(t0)))
	}
	return ms, nil
}

// meanMemUsed is the daemon-reported memUsed averaged over the sandboxes.
func meanMemUsed(ctx context.Context, cl *client.Client, ids []string) (float64, error) {
	m, err := cl.MetricsMany(ctx, ids)
	if err != nil {
		return 0, err
	}
	var sum float64
	for _, v := range m {
		sum += float64(v.MemUsed)
	}
	return sum / float64(max(len(m), 1)) / (1 << 20), nil
}

func concurrent(ctx context.Context, conns []*client.SandboxConn) ([]float64, float64, error) {
	lat, wall, err := benchd.AtOnce(len(conns), func(i int) error { return echo(ctx, conns[i]) })
	return lat, benchd.MS(wall), err
}

func report(c config, r results) {
	fmt.Printf("\n#### commands.run(\"echo hi\") — %s\n\n", c.label)
	fmt.Printf("| figure | value |\n|---|---|\n")
	fmt.Printf("| sequential, one warm sandbox, %d round trips (%v apart): p50 / p90 | %.1f / %.1f ms |\n",
		len(r.seq), c.gap, benchd.Quantile(r.seq, 0.5), benchd.Quantile(r.seq, 0.9))
	fmt.Printf("| same path without a process (`Stat(\"/\")`): p50 / p90 | %.1f / %.1f ms |\n",
		benchd.Quantile(r.stat, 0.5), benchd.Quantile(r.stat, 0.9))
	fmt.Printf("| %d at once across %d live sandboxes: p50 / p99 / all done | %.0f / %.0f / %.0f ms |\n",
		len(r.conc), len(r.conc), benchd.Quantile(r.conc, 0.5), benchd.Quantile(r.conc, 0.99), r.wall)
	fmt.Printf("| daemon-reported memUsed, mean over the %d sandboxes, idle | %.1f MiB |\n", len(r.conc), r.mem)
	// Host CPU per command, all processes: what a burst's contention
	// multiplies (an idle sandbox in the gaps costs ~0.3% of a CPU).
	fmt.Printf("| host CPU per command, sequential (incl. the gaps) / in the burst (until all done) | %.1f / %.1f ms |\n",
		benchd.MS(r.seqCPU)/float64(len(r.seq)+3), benchd.MS(r.concCPU)/float64(len(r.conc)))
	fmt.Printf("| host CPU per `Stat(\"/\")`, sequential (incl. the gaps) | %.1f ms |\n", benchd.MS(r.statCPU)/float64(len(r.stat)))
}

// syncBuf is an output sink safe for the client's writer goroutine.
type syncBuf struct {
	mu sync.Mutex
	b  []byte
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.b = append(s.b, p...)
	return len(p), nil
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return string(s.b)
}
