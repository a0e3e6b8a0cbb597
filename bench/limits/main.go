// Command limits measures what issue 12's in-sandbox limits cost and how
// soon a dead sandbox is known:
//
//   - create → first command and idle memory per sandbox for the build
//     before the limits (-before-bin: 02a915d^ built in a temporary
//     worktree) and this one, each with its own daemon, measured in
//     alternating rounds in one run, with ratios;
//   - the memory headroom: a sandbox of -memory-mb runs a Python hog until
//     its allocation fails; the host cgroup's limit and peak against what
//     the guest got;
//   - a sentry's death (SIGKILL from outside) → GET /sandboxes/{id} says
//     killed, -deaths times;
//   - a create of another disk size than the template's image: pooled vs
//     its shape's image made on the way vs already made (shapes.go).
//
// It prints a markdown section for docs/benchmarks.md. As root:
//
//	git worktree add --detach /tmp/before 02a915d^ && make -C /tmp/before build
//	for b in before after; do for t in base code-interpreter-v1; do mkdir -p /tmp/tpl-$b/$t
//	  cp /var/lib/forkbox/templates/$t/.complete /tmp/tpl-$b/$t/
//	  cp -al /var/lib/forkbox/templates/$t/rootfs /tmp/tpl-$b/$t/; done; done
//	go run ./bench/limits -bin ./bin -template-dir /tmp/tpl-after \
//	  -before-bin /tmp/before/bin -before-template-dir /tmp/tpl-before >> docs/benchmarks.md
//
// (Hard-linked copies of the templates: each daemon installs its agent
// into its rootfs by rename, which a copy keeps to itself.)
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/forkbox/forkbox/bench/benchd"
	"github.com/forkbox/forkbox/client"
	"github.com/forkbox/forkbox/internal/daemon"
	"github.com/forkbox/forkbox/internal/daemon/daemonproc"
)

type config struct {
	after, before benchd.Options
	rounds, n     int
	idle          int
	memoryMB      int
	deaths        int
}

func main() {
	var c config
	c.after.Flags(11)
	flag.StringVar(&c.before.Bin, "before-bin", "", "binaries of the build before the limits (required)")
	flag.StringVar(&c.before.TemplateDir, "before-template-dir", "", "its templates (default: -template-dir); "+
		"each daemon installs its agent into the rootfs, so builds sharing one break each other's restores")
	flag.IntVar(&c.rounds, "rounds", 3, "alternating rounds of creates per build")
	flag.IntVar(&c.n, "n", 5, "creates per build per round")
	flag.IntVar(&c.idle, "idle", 8, "idle sandboxes per build for the memory measurement")
	flag.IntVar(&c.memoryMB, "memory-mb", 300, "memoryMB of the headroom measurement's sandbox")
	flag.IntVar(&c.deaths, "deaths", 7, "sentries killed for the death measurement")
	flag.Parse()
	if c.before.Bin == "" {
		fmt.Fprintln(os.Stderr, "limits: -before-bin is required")
		os.Exit(2)
	}
	if c.before.TemplateDir == "" {
		c.before.TemplateDir = c.after.TemplateDir
	}
	c.before.NetworkIndex = c.after.NetworkIndex + 1
	benchd.Main("limits", func(ctx context.Context) error { return run(ctx, c) })
}

// build is one daemon under measurement.
type build struct {
	name   string
	d      *benchd.Daemon
	cl     *client.Client
	create []float64 // create → first command, ms
	// idle is the host memory of each idle sandbox (its memory cgroup's
	// usage), own the part that is its own (rss and shmem: the sentry's
	// memory file) without the page cache of template files, which is
	// charged to whichever sandbox reads a file first, MiB.
	idle, own []float64
}

func run(ctx context.Context, c config) error {
	var builds []*build
	for _, b := range []struct {
		name string
		o    benchd.Options
	}{{"before the limits", c.before}, {"with the limits", c.after}} {
		d, err := benchd.Start(ctx, b.o.Named("limits", "--pool-size", "0"))
		if err != nil {
			return fmt.Errorf("%s: %w", b.name, err)
		}
		defer d.Stop()
		builds = append(builds, &build{name: b.name, d: d, cl: client.New(d.URL, d.Key)})
	}
	for round := range c.rounds {
		for _, b := range builds {
			if err := b.creates(ctx, c.n); err != nil {
				return fmt.Errorf("%s, round %d: %w", b.name, round+1, err)
			}
		}
	}
	for _, b := range builds {
		if err := b.idleMemory(ctx, c.idle); err != nil {
			return fmt.Errorf("%s: %w", b.name, err)
		}
	}
	after := builds[1]
	hr, err := headroom(ctx, after, c.memoryMB)
	if err != nil {
		return err
	}
	deaths, err := deathTimes(ctx, after, c.deaths)
	if err != nil {
		return err
	}
	shaped := c.after
	shaped.NetworkIndex += 2 // the two daemons above are still up
	sh, err := shapes(ctx, shaped, c.n)
	if err != nil {
		return err
	}
	report(c, builds, hr, deaths)
	reportShapes(sh)
	return nil
}

// creates times n creates of base (a restore of its image: no pool), each
// until its first command's output, and kills them.
func (b *build) creates(ctx context.Context, n int) error {
	for range n {
		t0 := time.Now()
		sb, err := b.cl.CreateSandbox(ctx, client.CreateOptions{TemplateID: "base", Timeout: 5 * time.Minute})
		if err != nil {
			return err
		}
		_, err = run1(ctx, sb.Conn(), "echo hi")
		b.create = append(b.create, ms(time.Since(t0)))
		b.cl.KillSandbox(context.WithoutCancel(ctx), sb.SandboxID)
		if err != nil {
			return err
		}
	}
	slog.Info("creates", "build", b.name, "p50_ms", median(b.create))
	return nil
}

// idleMemory creates n base sandboxes, lets them settle and reads each
// one's host memory cgroup (what the host pays for it), then kills them.
func (b *build) idleMemory(ctx context.Context, n int) error {
	var ids []string
	defer func() {
		for _, id := range ids {
			b.cl.KillSandbox(context.WithoutCancel(ctx), id)
		}
	}()
	for range n {
		sb, err := b.cl.CreateSandbox(ctx, client.CreateOptions{TemplateID: "base", Timeout: 5 * time.Minute})
		if err != nil {
			return err
		}
		ids = append(ids, sb.SandboxID)
	}
	time.Sleep(5 * time.Second)
	for _, id := range ids {
		cg, err := b.cgroup(id)
		if err != nil {
			return err
		}
		u, err := readInt(filepath.Join(cg, "memory.usage_in_bytes"))
		if err != nil {
			return err
		}
		own, err := statSum(filepath.Join(cg, "memory.stat"), "rss", "shmem")
		if err != nil {
			return err
		}
		b.idle, b.own = append(b.idle, float64(u)/(1<<20)), append(b.own, float64(own)/(1<<20))
	}
	slog.Info("idle memory", "build", b.name, "p50_mib", median(b.idle), "own_p50_mib", median(b.own))
	return nil
}

// cgroup is the host memory cgroup of sandbox id.
func (b *build) cgroup(id string) (string, error) {
	cid, err := daemonproc.ContainerOf(b.d.DataDir, id)
	if err != nil {
		return "", err
	}
	// Daemons before per-index cgroup parents put every sandbox under
	// "forkbox"; newer ones under daemon.CgroupParent of their index.
	for _, parent := range []string{daemon.CgroupParent(b.d.NetworkIndex()), "forkbox"} {
		dir := filepath.Join("/sys/fs/cgroup/memory", parent, cid)
		if _, err := os.Stat(dir); err == nil {
			return dir, nil
		}
	}
	return "", fmt.Errorf("no memory cgroup for container %s", cid)
}

// headroomResult is what a sandbox of memoryMB may use and what the host
// allows it.
type headroomResult struct {
	memoryMB            int
	limitMiB, peakMiB   float64 // the host cgroup's limit and peak usage
	idleMiB             float64 // host usage before the hog
	reachedMiB, exit    int     // the hog's last step, its exit code
	stderrTail, outcome string
}

// hog grows a Python list by 16 MiB steps until an allocation fails.
const hog = `python3 -c "
a = []
while True:
    a.append(b'x' * (16 << 20))
    print(len(a) * 16, flush=True)
"`

func headroom(ctx context.Context, b *build, memoryMB int) (headroomResult, error) {
	r := headroomResult{memoryMB: memoryMB}
	sb, err := b.cl.CreateSandbox(ctx, client.CreateOptions{TemplateID: "base", Timeout: 5 * time.Minute, MemoryMB: memoryMB})
	if err != nil {
		return r, err
	}
	defer b.cl.KillSandbox(context.WithoutCancel(ctx), sb.SandboxID)
	cg, err := b.cgroup(sb.SandboxID)
	if err != nil {
		return r, err
	}
	limit, _ := readInt(filepath.Join(cg, "memory.limit_in_bytes"))
	idle, _ := readInt(filepath.Join(cg, "memory.usage_in_bytes"))
	os.WriteFile(filepath.Join(cg, "memory.max_usage_in_bytes"), []byte("0"), 0o644) // reset the peak
	res, err := run1(ctx, sb.Conn(), hog)
	if err != nil {
		return r, err
	}
	peak, _ := readInt(filepath.Join(cg, "memory.max_usage_in_bytes"))
	r.limitMiB, r.idleMiB, r.peakMiB = float64(limit)/(1<<20), float64(idle)/(1<<20), float64(peak)/(1<<20)
	lines := strings.Fields(res.stdout)
	if len(lines) > 0 {
		r.reachedMiB, _ = strconv.Atoi(lines[len(lines)-1])
	}
	r.exit = res.code
	r.stderrTail = lastLine(res.stderr)
	r.outcome = "killed"
	if strings.Contains(res.stderr, "MemoryError") {
		r.outcome = "MemoryError"
	}
	slog.Info("headroom", "limit_mib", r.limitMiB, "peak_mib", r.peakMiB, "reached_mib", r.reachedMiB, "outcome", r.outcome)
	return r, nil
}

// deathTimes kills the sentry of n sandboxes from outside and times each
// until the API answers killed.
func deathTimes(ctx context.Context, b *build, n int) ([]float64, error) {
	var out []float64
	for range n {
		sb, err := b.cl.CreateSandbox(ctx, client.CreateOptions{TemplateID: "base", Timeout: 5 * time.Minute})
		if err != nil {
			return nil, err
		}
		d, err := killSentry(ctx, b, sb.SandboxID)
		if err != nil {
			b.cl.KillSandbox(context.WithoutCancel(ctx), sb.SandboxID)
			return nil, err
		}
		out = append(out, d)
	}
	slog.Info("deaths", "p50_ms", median(out))
	return out, nil
}
