// Command density measures how many sandboxes this host holds and how the
// daemon behaves with many at once (what --max-sandboxes' default rests
// on): N sandboxes created one after the other and kept live — the create
// time of the 1st vs the Nth, p50/p95 over all, host memory per sandbox
// (MemAvailable before and after), `echo` p50/p99 across all N — and K
// different sandboxes snapshotted, rolled back, paused and resumed
// concurrently vs one at a time (operations per second). A pause is
// measured alone: the API answers it at once, so it ends when the
// sandbox's log says "sandbox paused"; a resume is the connect of a paused
// sandbox. It prints a markdown section for docs/benchmarks.md.
//
// It starts its own daemon (<bin>/forkbox serve, as root) on a temporary
// data dir and its own sandbox network; it stops creating when the host's
// available memory falls under -min-free-mib, and kills everything at the end.
//
//	go run ./bench/density -bin ./bin >> docs/benchmarks.md
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/forkbox/forkbox/bench/benchd"
	"github.com/forkbox/forkbox/client"
)

type config struct {
	daemon           benchd.Options
	n, k, minFreeMiB int
	sandboxTTL       time.Duration
	// background, if set, is a shell command each sandbox starts in the
	// background once created: a process of its own keeps the agent's
	// OOM guard from counting the sandbox quiet (so it keeps looking).
	background string
}

func main() {
	var c config
	c.daemon.Flags(10)
	flag.IntVar(&c.n, "n", 100, "sandboxes live at once")
	flag.IntVar(&c.k, "k", 10, "sandboxes operated on concurrently")
	flag.IntVar(&c.minFreeMiB, "min-free-mib", 4096, "stop creating below this much available host memory")
	flag.DurationVar(&c.sandboxTTL, "ttl", 15*time.Minute, "sandboxes' time to live")
	flag.StringVar(&c.background, "background", "", "a shell command each sandbox runs in the background once created (e.g. 'sleep 3600': then no sandbox is quiet)")
	flag.Parse()
	benchd.Main("density", func(ctx context.Context) error { return run(ctx, c) })
}

func run(ctx context.Context, c config) error {
	d, err := benchd.Start(ctx, c.daemon.Named("density", "--pool-size", "0", "--max-sandboxes", strconv.Itoa(c.n+c.k+10)))
	if err != nil {
		return err
	}
	defer d.Stop()
	cl := client.New(d.URL, d.Key)
	dn, err := density(ctx, c, cl)
	defer killAll(cl, dn.ids)
	if err != nil {
		return err
	}
	killAll(cl, dn.ids)
	dn.ids = nil
	var cc []concResult
	if c.k > 0 { // -k 0: density only
		if cc, err = concurrency(ctx, c, cl); err != nil {
			return err
		}
	}
	report(c, dn, cc)
	return nil
}

// densityResult is what N live sandboxes cost.
type densityResult struct {
	ids                []string
	create, echo       []float64 // ms
	freeBefore, freeAt int64     // MiB available
	// idleBase and idleAll are the host's busy CPU (% of one CPU) over
	// idleWindow before the first create and with all N live and idle.
	idleBase, idleAll float64
}

// idleWindow is how long the host's idle CPU use is measured.
const idleWindow = 10 * time.Second

func density(ctx context.Context, c config, cl *client.Client) (*densityResult, error) {
	r := &densityResult{freeBefore: memAvailableMiB(), idleBase: hostBusy(idleWindow)}
	for i := range c.n {
		if free := memAvailableMiB(); free < int64(c.minFreeMiB) {
			return r, fmt.Errorf("host memory: %d MiB available after %d sandboxes, under -min-free-mib %d", free, i, c.minFreeMiB)
		}
		t0 := time.Now()
		sb, err := cl.CreateSandbox(ctx, client.CreateOptions{TemplateID: "base", Timeout: c.sandboxTTL})
		if err != nil {
			return r, fmt.Errorf("create #%d: %w", i+1, err)
		}
		r.create = append(r.create, benchd.MS(time.Since(t0)))
		r.ids = append(r.ids, sb.SandboxID)
		if c.background != "" {
			if err := shell(ctx, cl, sb.SandboxID, "nohup "+c.background+" >/dev/null 2>&1 &"); err != nil {
				return r, err
			}
		}
		if (i+1)%10 == 0 {
			slog.Info("created", "n", i+1, "last_ms", r.create[i], "avail_mib", memAvailableMiB())
		}
	}
	time.Sleep(5 * time.Second) // let the restores' page cache and agents settle
	r.freeAt = memAvailableMiB()
	r.idleAll = hostBusy(idleWindow)
	slog.Info("idle", "sandboxes", len(r.ids), "host_cpu_pct", r.idleAll, "before_pct", r.idleBase)
	for _, id := range r.ids {
		t0 := time.Now()
		if err := echo(ctx, cl, id); err != nil {
			return r, err
		}
		r.echo = append(r.echo, benchd.MS(time.Since(t0)))
	}
	return r, nil
}

func echo(ctx context.Context, cl *client.Client, id string) error {
	return shell(ctx, cl, id, "echo hi")
}

// shell runs line in sandbox id; a non-zero exit is an error.
func shell(ctx context.Context, cl *client.Client, id, line string) error {
	sb, err := cl.Connect(ctx, id, 0)
	if err != nil {
		return err
	}
	code, err := sb.Conn().Exec(ctx, client.ExecOptions{Shell: line})
	if err == nil && code != 0 {
		err = fmt.Errorf("%q in %s: exit %d", line, id, code)
	}
	return err
}

// op is one operation on one sandbox.
type op struct {
	name string
	do   func(ctx context.Context, cl *client.Client, id string, snap string) error
}

var ops = []op{
	{"snapshot", func(ctx context.Context, cl *client.Client, id, _ string) error {
		_, err := cl.Snapshot(ctx, id, "")
		return err
	}},
	{"rollback", func(ctx context.Context, cl *client.Client, id, snap string) error {
		_, err := cl.Rollback(ctx, id, snap)
		return err
	}},
	{"pause", func(ctx context.Context, cl *client.Client, id, _ string) error {
		t0 := time.Now()
		if err := cl.Pause(ctx, id); err != nil {
			return err
		}
		return benchd.WaitLog(ctx, cl, id, "sandbox paused", t0) // memory and files on disk, sandbox released
	}},
	{"resume", func(ctx context.Context, cl *client.Client, id, _ string) error {
		_, err := cl.Connect(ctx, id, 0) // answers once the sandbox runs again
		return err
	}},
}

// concResult holds, per operation, the ops/s one at a time and K at once,
// and the p50 latency of each.
type concResult struct {
	name               string
	serialOps, concOps float64
	serialP50, concP50 float64
}

// concurrency makes K sandboxes, a snapshot of each, and runs every
// operation on all K one at a time, then every operation K at once (the
// operations in order, so the pause leaves them paused for the resume).
func concurrency(ctx context.Context, c config, cl *client.Client) ([]concResult, error) {
	var ids, snaps []string
	defer func() { killAll(cl, ids) }()
	for range c.k {
		sb, err := cl.CreateSandbox(ctx, client.CreateOptions{TemplateID: "base", Timeout: c.sandboxTTL})
		if err != nil {
			return nil, err
		}
		ids = append(ids, sb.SandboxID)
		s, err := cl.Snapshot(ctx, sb.SandboxID, "")
		if err != nil {
			return nil, err
		}
		snaps = append(snaps, s.SnapshotID)
	}
	out := make([]concResult, len(ops))
	for _, par := range []int{1, len(ids)} {
		for i, o := range ops {
			n, p50, err := timeOps(ctx, cl, o, ids, snaps, par)
			if err != nil {
				return nil, fmt.Errorf("%s %d at a time: %w", o.name, par, err)
			}
			out[i].name = o.name
			if par == 1 {
				out[i].serialOps, out[i].serialP50 = n, p50
			} else {
				out[i].concOps, out[i].concP50 = n, p50
			}
			slog.Info("concurrency", "op", o.name, "at_once", par, "ops_s", n, "p50_ms", p50)
		}
	}
	return out, nil
}

// timeOps runs o once on every sandbox, par at a time, and returns the
// operations per second and the median latency.
func timeOps(ctx context.Context, cl *client.Client, o op, ids, snaps []string, par int) (float64, float64, error) {
	lat := make([]float64, len(ids))
	errs := make([]error, len(ids))
	sem := make(chan struct{}, par)
	var wg sync.WaitGroup
	t0 := time.Now()
	for i, id := range ids {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			s := time.Now()
			errs[i] = o.do(ctx, cl, id, snaps[i])
			lat[i] = benchd.MS(time.Since(s))
		}()
	}
	wg.Wait()
	total := time.Since(t0)
	if err := errors.Join(errs...); err != nil {
		return 0, 0, err
	}
	return float64(len(ids)) / total.Seconds(), benchd.Quantile(lat, 0.5), nil
}

func killAll(cl *client.Client, ids []string) {
	for _, id := range ids {
		cl.KillSandbox(context.Background(), id)
	}
}

// hostBusy is the host's busy CPU time over d, in % of one CPU (every
// process counted: the sandboxes' sentries, gofers and stubs, the daemon).
func hostBusy(d time.Duration) float64 {
	b0, t0 := benchd.BusyCPU(), time.Now()
	time.Sleep(d)
	return float64(benchd.BusyCPU()-b0) / float64(time.Since(t0)) * 100
}

// memAvailableMiB reads MemAvailable from /proc/meminfo.
func memAvailableMiB() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "MemAvailable:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb / 1024
		}
	}
	return 0
}

func report(c config, dn *densityResult, cc []concResult) {
	n := len(dn.create)
	fmt.Printf("\n## Density and concurrency (bench/density)\n\n")
	bg := ""
	if c.background != "" {
		bg = fmt.Sprintf(" -background %q", c.background)
	}
	fmt.Printf("`go run ./bench/density -bin ./bin -n %d -k %d%s` (own daemon, pool off, base template; %s, %d cores).\n\n",
		c.n, c.k, bg, time.Now().UTC().Format("2006-01-02"), benchd.CPUs())
	fmt.Printf("| %d sandboxes live at once | value |\n|---|---|\n", n)
	fmt.Printf("| create, 1st | %.0f ms |\n| create, %dth | %.0f ms |\n", dn.create[0], n, dn.create[n-1])
	fmt.Printf("| create p50 / p95 | %.0f / %.0f ms |\n", benchd.Quantile(dn.create, 0.5), benchd.Quantile(dn.create, 0.95))
	fmt.Printf("| `echo` p50 / p99 / max across all | %.0f / %.0f / %.0f ms |\n", benchd.Quantile(dn.echo, 0.5),
		benchd.Quantile(dn.echo, 0.99), slices.Max(dn.echo))
	fmt.Printf("| host memory per sandbox (MemAvailable drop / N) | %.1f MiB |\n", float64(dn.freeBefore-dn.freeAt)/float64(n))
	fmt.Printf("| host CPU busy over %s, all %d idle (before the first create) | %.0f%% (%.0f%%) of one CPU: %.2f%% per sandbox |\n\n",
		idleWindow, n, dn.idleAll, dn.idleBase, (dn.idleAll-dn.idleBase)/float64(n))
	if len(cc) == 0 {
		return
	}
	fmt.Printf("| %d different sandboxes | one at a time | p50 one at a time | %d at once | p50 at once |\n|---|---|---|---|---|\n", c.k, c.k)
	for _, r := range cc {
		fmt.Printf("| %s | %.1f ops/s | %.0f ms | %.1f ops/s | %.0f ms |\n", r.name, r.serialOps, r.serialP50, r.concOps, r.concP50)
	}
}
