// Command bench measures forkbox against raw runsc on the same machine in
// one run and writes docs/benchmarks.md.
//
//	go run ./bench -bin bin -template-dir /var/lib/forkbox/templates -out docs/benchmarks.md [-n 15] [-only create,echo,...]
//
// It must run as root (runsc, network namespaces, cgroups). It starts its
// own daemon (`bin/forkbox serve`, or internal/daemon.Run in a child process
// while that CLI does not exist) on a free loopback port with network index
// 7, and drives raw runsc with its own --root and namespaces fbbench-N
// (10.250.N.0/24). Everything it creates is removed at the end, also on
// failure or interrupt.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/forkbox/forkbox/internal/hostmm"
)

type config struct {
	bin, templateDir, out string
	n, echoN, cloneReps   int
	burstN                int // live sandboxes of the burst section
	only                  map[string]bool
	keep, shareTemplate   bool
	hugePages             bool
	sharedTemplateDir     string // -template-dir as given
	// prevBin and prevTemplateDir are an earlier build (the interpreter
	// before Jupyter) whose daemon runs the code-interpreter rows too.
	prevBin, prevTemplateDir string
	// serveFlags are more `forkbox serve` flags for the current build's daemon.
	serveFlags string
	// netIndex and rawSlot0 place this run's networks (the daemon's
	// index, the first raw namespace's slot), so two runs on one host
	// (helpers benchmarking in parallel) do not remove each other's.
	netIndex, rawSlot0 int
	rawFlags           string // more global flags of raw runsc, space-separated
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == internalDaemonArg {
		if err := runInternalDaemon(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "daemon:", err)
			os.Exit(1)
		}
		return
	}
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})))
	if err := run(); err != nil {
		slog.Error("bench failed", "err", err)
		os.Exit(1)
	}
}

func parseFlags() (config, error) {
	var c config
	var only string
	flag.StringVar(&c.bin, "bin", "bin", "directory with forkbox (optional), forkbox-agent and runsc")
	flag.StringVar(&c.templateDir, "template-dir", "/var/lib/forkbox/templates", "template directory (base/rootfs)")
	flag.StringVar(&c.out, "out", "docs/benchmarks.md", "report to write")
	flag.IntVar(&c.n, "n", 15, "iterations per measurement")
	flag.IntVar(&c.echoN, "echo-n", 50, "echo round trips")
	flag.IntVar(&c.cloneReps, "clone-reps", 3, "rounds per clone count")
	flag.IntVar(&c.burstN, "burst-n", 100, "live sandboxes that get one command each at once (burst section)")
	flag.IntVar(&c.netIndex, "network-index", networkIndex, "the bench daemon's network index (serve --network-index); another run beside this one needs another")
	flag.StringVar(&c.rawFlags, "raw-flags", "", "more global runsc flags for the raw side, space-separated (e.g. --restore-on-demand, the floor of forkbox's default)")
	flag.IntVar(&c.rawSlot0, "raw-slot", 1, "first raw runsc namespace slot (fbbench-N, 10.250.N.0/24); another run beside this one needs another")
	flag.StringVar(&only, "only", "", "comma-separated sections: "+sectionNames())
	flag.BoolVar(&c.keep, "keep", false, "keep the temporary directory (daemon log, data)")
	flag.BoolVar(&c.shareTemplate, "share-template", false, "use -template-dir in place instead of a private copy of its base and code-interpreter-v1 templates")
	flag.BoolVar(&c.hugePages, "host-hugepages", true, "set the host's THP settings so runsc uses huge pages, as `forkbox serve` does by default, before either side runs")
	flag.StringVar(&c.serveFlags, "serve-flags", "", "more `forkbox serve` flags for the -bin build's daemon, space-separated (e.g. --restore-on-demand=false)")
	flag.StringVar(&c.prevBin, "prev-bin", "", "bin directory of an earlier build whose code interpreter the codeinterp and dataframe sections measure too (its own daemon, same run)")
	flag.StringVar(&c.prevTemplateDir, "prev-template-dir", "", "that build's template directory (built by its `make template`)")
	flag.Parse()
	if (c.prevBin == "") != (c.prevTemplateDir == "") {
		return c, fmt.Errorf("-prev-bin and -prev-template-dir go together")
	}
	if c.n < 1 || c.echoN < 1 || c.cloneReps < 1 || c.burstN < 1 {
		return c, fmt.Errorf("-n, -echo-n, -clone-reps and -burst-n must be positive")
	}
	c.only = map[string]bool{}
	for _, s := range strings.Split(only, ",") {
		if s = strings.TrimSpace(s); s != "" {
			if !strings.Contains(","+sectionNames()+",", ","+s+",") {
				return c, fmt.Errorf("unknown section %q (have %s)", s, sectionNames())
			}
			c.only[s] = true
		}
	}
	var err error
	if c.prevBin != "" {
		if c.prevBin, err = filepath.Abs(c.prevBin); err != nil {
			return c, err
		}
	}
	c.bin, err = filepath.Abs(c.bin)
	return c, err
}

func sectionNames() string {
	var ns []string
	for _, s := range sections {
		ns = append(ns, s.name)
	}
	return strings.Join(ns, ",")
}

func (c config) want(section string) bool { return len(c.only) == 0 || c.only[section] }

func run() error {
	cfg, err := parseFlags()
	if err != nil {
		return err
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("run as root (runsc, namespaces, cgroups)")
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	tmp, err := os.MkdirTemp("", "forkbox-bench-")
	if err != nil {
		return err
	}
	if !cfg.keep {
		defer os.RemoveAll(tmp)
	}
	start := time.Now()
	thp := hostHugePages(cfg.hugePages)
	res := newResults()
	cfg.sharedTemplateDir = cfg.templateDir
	if !cfg.shareTemplate {
		if cfg.templateDir, err = privateTemplateDir(ctx, cfg.templateDir, tmp); err != nil {
			return err
		}
		res.Note("create", "Both sides use a private copy (`cp -a`) of `%s/base` (and the daemon one of `code-interpreter-v1`, which it "+
			"needs to start) made at the start of the run, not the shared "+
			"directory: every daemon installs its own agent into the shared rootfs, and during development of this program "+
			"another daemon deleted the bench's template image mid-run. `-share-template` turns the copy off.", cfg.sharedTemplateDir)
	}
	runRaw(ctx, cfg, res, filepath.Join(tmp, "raw"))
	if err := runForkbox(ctx, cfg, res, tmp); err != nil {
		slog.Error("forkbox part failed", "err", err)
		res.Note("create", "The forkbox part did not run: %s", shortErr(err))
	}
	if err := runPrevious(ctx, cfg, res, filepath.Join(tmp, "prev")); err != nil {
		slog.Error("previous build's part failed", "err", err)
		res.Note("codeinterp", "The previous build's part did not run: %s", shortErr(err))
	}
	if ctx.Err() != nil {
		return fmt.Errorf("interrupted; no report written")
	}
	h := Header{
		Command: "go run ./bench " + strings.Join(os.Args[1:], " "), Date: start.UTC().Format("2006-01-02 15:04 MST"),
		Machine: machine(), Runsc: runscVersion(cfg.bin), HugePages: thp, Duration: time.Since(start).Round(time.Second).String(),
		N: cfg.n, EchoN: cfg.echoN, CloneReps: cfg.cloneReps,
	}
	if err := os.MkdirAll(filepath.Dir(cfg.out), 0o755); err != nil {
		return err
	}
	if err := writeReport(cfg.out, h, res, sections, cfg.only); err != nil {
		return err
	}
	slog.Info("report written", "path", cfg.out, "took", time.Since(start).Round(time.Second))
	return nil
}

// hostHugePages applies (when on) the daemon's host huge page settings
// before anything runs, so raw runsc and forkbox see the same host, and
// describes them for the report.
func hostHugePages(on bool) string {
	if on {
		if _, err := hostmm.Enable(hostmm.DefaultDir); err != nil {
			slog.Warn("host huge pages", "err", err)
		}
	}
	s, err := hostmm.Read(hostmm.DefaultDir)
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	use := "small pages only"
	if s.HugePagesForGVisor() {
		use = "huge pages"
	}
	return fmt.Sprintf("THP %s: runsc backs sandbox memory with %s (`-host-hugepages=%t`)", s, use, on)
}

// runRaw runs the raw runsc measurements of the selected sections.
func runRaw(ctx context.Context, cfg config, res *Results, dir string) {
	rb, err := newRawBench(ctx, cfg, res, dir)
	if err != nil {
		slog.Error("raw runsc setup failed", "err", err)
		return
	}
	defer rb.close(ctx)
	steps := benchSteps(cfg, rb.benchCreate, rb.benchEcho, rb.benchMemory, rb.benchPauseResume,
		rb.benchSnapshot, rb.benchClone, rb.benchRollback)
	for _, s := range steps {
		if ctx.Err() != nil {
			return
		}
		slog.Info("raw runsc", "section", s.name)
		s.f(ctx)
	}
}

// runForkbox starts a daemon, runs the forkbox measurements and stops it.
func runForkbox(ctx context.Context, cfg config, res *Results, tmp string) error {
	d, err := startDaemon(ctx, cfg.bin, cfg.templateDir, tmp, cfg.hugePages, cfg.netIndex, strings.Fields(cfg.serveFlags)...)
	if err != nil {
		return err
	}
	defer d.Stop(context.WithoutCancel(ctx))
	res.Note("create", "forkbox daemon: `%s`; its log is in the run's temporary directory (-keep keeps it).", d.Launcher)
	fb := &fbBench{c: d.Client, d: d, res: res, cfg: cfg, side: FB}
	steps := benchSteps(cfg, fb.benchCreate, fb.benchEcho, fb.benchMemory, fb.benchPauseResume,
		fb.benchSnapshot, fb.benchClone, fb.benchRollback)
	if cfg.want("codeinterp") { // forkbox only: raw runsc has no counterpart
		steps = append(steps, step{"codeinterp", fb.benchCodeInterp})
	}
	if cfg.want("dataframe") {
		steps = append(steps, step{"dataframe", fb.benchDataFrame})
	}
	if cfg.want("burst") {
		steps = append(steps, step{"burst", fb.benchBurst})
	}
	for _, s := range steps {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		slog.Info("forkbox", "section", s.name)
		s.f(ctx)
	}
	if st := summarize(loggedDurations(d.LogPath, "sandbox paused")); st != nil {
		res.Note("pause", "Cross-check: the daemon's own log (\"sandbox paused took=…\", checkpoint + release) says p50 %s ms, p90 %s ms over %d pauses of both sizes.",
			num(st.P50), num(st.P90), st.N)
	}
	return nil
}

type step struct {
	name string
	f    func(context.Context)
}

// benchSteps orders one side's measurements; the persistence ones run per
// size (tiny, then 256 MiB). Pause and resume are one measurement.
func benchSteps(cfg config, create, echo, memory func(context.Context),
	pause, snapshot, clone, rollback func(context.Context, size)) []step {
	var out []step
	add := func(name string, f func(context.Context)) {
		if cfg.want(name) {
			out = append(out, step{name, f})
		}
	}
	perSize := func(f func(context.Context, size)) func(context.Context) {
		return func(ctx context.Context) {
			for _, sz := range sizes {
				f(ctx, sz)
			}
		}
	}
	add("create", create)
	add("echo", echo)
	add("memory", memory)
	if cfg.want("pause") || cfg.want("resume") {
		out = append(out, step{"pause+resume", perSize(pause)})
	}
	add("snapshot", perSize(snapshot))
	add("clone", perSize(clone))
	add("rollback", perSize(rollback))
	return out
}

// machine describes the host: cores, memory, kernel.
func machine() string {
	mem := "?"
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb int64
		fmt.Sscanf(strings.TrimPrefix(strings.SplitN(string(b), "\n", 2)[0], "MemTotal:"), "%d", &kb)
		mem = fmt.Sprintf("%.1f GiB", float64(kb)/(1<<20))
	}
	kernel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	return fmt.Sprintf("%d CPUs (nproc), %s RAM, Linux %s, %s/%s, %s", runtime.NumCPU(), mem,
		strings.TrimSpace(string(kernel)), runtime.GOOS, runtime.GOARCH, osName())
}

func osName() string {
	b, _ := os.ReadFile("/etc/os-release")
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "PRETTY_NAME="); ok {
			return strings.Trim(v, `"`)
		}
	}
	return "unknown OS"
}

func runscVersion(bin string) string {
	out, err := exec.Command(filepath.Join(bin, "runsc"), "--version").Output()
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	v := strings.Join(strings.Fields(string(out)), " ")
	return "`" + v + "` (static build of gvisor.dev/gvisor v0.0.0-20260905035102-160fafc42237, pinned in go.mod)"
}
