// Package benchd starts the `forkbox serve` a stand-alone benchmark program
// measures: a temporary data dir, its own sandbox network index, the cached
// templates, and a stop that leaves nothing of it on the host.
package benchd

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/forkbox/forkbox/internal/daemon/daemonproc"
)

// Options says which daemon to start.
type Options struct {
	// Bin is the directory of forkbox, forkbox-agent and runsc.
	Bin string
	// TemplateDir holds the cached templates the daemon starts from.
	TemplateDir string
	// NetworkIndex is the daemon's sandbox network (10.(201+N).0.0/16);
	// each benchmark program has its own so they never clean each other up.
	NetworkIndex int
	// Name goes into the temporary dir's name (forkbox-<name>bench-…).
	Name string
	// Args are extra `serve` flags.
	Args []string
	// ServeFlags are -serve-flags: appended to Args by Named.
	ServeFlags []string
	// Env adds variables to the daemon's environment (an object store's
	// AWS_* settings).
	Env []string
}

// Daemon is a running benchmark daemon.
type Daemon struct {
	// URL and Key reach its control API.
	URL, Key string
	// DataDir is its data directory.
	DataDir string
	// LogPath is where its log goes.
	LogPath string
	// Proc is the process handle.
	Proc *daemonproc.Proc

	tmp          string
	networkIndex int
}

// NetworkIndex is the daemon's --network-index.
func (d *Daemon) NetworkIndex() int { return d.networkIndex }

// Start runs `<bin>/forkbox serve` on a fresh temporary data dir and waits
// until it answers /health. The daemon dies with this program (Pdeathsig).
func Start(ctx context.Context, o Options) (*Daemon, error) {
	tmp, err := os.MkdirTemp("", "forkbox-"+o.Name+"bench-")
	if err != nil {
		return nil, err
	}
	d := &Daemon{DataDir: filepath.Join(tmp, "data"), LogPath: filepath.Join(tmp, "daemon.log"),
		tmp: tmp, networkIndex: o.NetworkIndex}
	slog.Info("starting daemon", "log", d.LogPath)
	d.Proc, err = daemonproc.Start(ctx, daemonproc.Options{
		Bin: o.Bin, DataDir: d.DataDir, TemplateDir: o.TemplateDir,
		Args:         append([]string{"--network-index", strconv.Itoa(o.NetworkIndex)}, o.Args...),
		LogPath:      d.LogPath,
		Env:          o.Env,
		ReadyTimeout: 5 * time.Minute,
		StopTimeout:  15 * time.Second,
		SysProcAttr:  &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM},
	})
	if err != nil {
		d.removeTmp()
		return nil, fmt.Errorf("start daemon: %w", err)
	}
	d.URL, d.Key = d.Proc.URL, d.Proc.APIKey
	slog.Info("daemon ready", "url", d.URL)
	return d, nil
}

// Stop kills the daemon's sandboxes, terminates it, removes its firewall
// table (a daemon keeps it across restarts on purpose; a benchmark's daemon
// is gone for good), unmounts what its runtime left and removes the dir.
func (d *Daemon) Stop() {
	if err := d.Proc.Stop(context.Background()); err != nil && !errors.Is(err, context.Canceled) {
		slog.Warn("stop daemon", "err", err)
	}
	if err := exec.Command("nft", "delete", "table", "inet", fmt.Sprintf("forkbox%d", d.networkIndex)).Run(); err != nil {
		slog.Debug("delete daemon firewall table", "err", err)
	}
	d.removeTmp()
}

func (d *Daemon) removeTmp() {
	daemonproc.UnmountUnder(d.tmp)
	if err := os.RemoveAll(d.tmp); err != nil {
		slog.Warn("remove bench dir", "dir", d.tmp, "err", err)
	}
}

// ErrNoHandle says the runtime has no handle (yet) for a sandbox.
var ErrNoHandle = errors.New("no runtime handle for the sandbox")

// SandboxAddr reads the sandbox's address from the runtime's handle
// (<data>/runtime/sandboxes/<runtime id>/handle.json, field addr).
func (d *Daemon) SandboxAddr(id string) (string, error) {
	files, err := filepath.Glob(filepath.Join(d.DataDir, "runtime", "sandboxes", "*", "handle.json"))
	if err != nil {
		return "", err
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return "", err
		}
		var h struct {
			ID   string `json:"id"`
			Addr string `json:"addr"`
		}
		if err := json.Unmarshal(b, &h); err != nil {
			return "", fmt.Errorf("%s: %w", f, err)
		}
		if strings.HasPrefix(h.ID, id) && h.Addr != "" {
			return h.Addr, nil
		}
	}
	return "", fmt.Errorf("sandbox %s in %s: %w", id, d.DataDir, ErrNoHandle)
}

// Flags registers -bin, -template-dir, -network-index (default index:
// each benchmark program has its own) and -serve-flags on the command
// line, filling o.
func (o *Options) Flags(index int) {
	flag.StringVar(&o.Bin, "bin", "bin", "directory of forkbox, forkbox-agent and runsc")
	flag.StringVar(&o.TemplateDir, "template-dir", "/var/lib/forkbox/templates", "cached templates")
	flag.IntVar(&o.NetworkIndex, "network-index", index, "sandbox network of the bench daemon (10.(201+N).0.0/16)")
	flag.Func("serve-flags", "more flags for the daemon's forkbox serve, space-separated (e.g. --memory-wake=false)", func(v string) error {
		o.ServeFlags = strings.Fields(v)
		return nil
	})
}

// Named returns o with the program's name and extra serve flags (the
// program's own, then -serve-flags, which can override them).
func (o Options) Named(name string, args ...string) Options {
	o.Name, o.Args = name, slices.Concat(o.Args, args, o.ServeFlags)
	return o
}

// Main runs a benchmark program's run with a text logger on stderr and a
// context that SIGINT or SIGTERM cancels (so its daemon is stopped), and
// exits 1 when run fails.
func Main(name string, run func(context.Context) error) {
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, nil)))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx)
	stop()
	if err != nil {
		slog.Error(name, "err", err)
		os.Exit(1)
	}
}

// MS is d in milliseconds.
func MS(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Quantile is the nearest-rank q-quantile of vals (0 when empty).
func Quantile(vals []float64, q float64) float64 {
	s := slices.Clone(vals)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	i := int(q*float64(len(s))+0.5) - 1
	return s[max(0, min(i, len(s)-1))]
}

// CPUs is the host's processor count as /proc/cpuinfo lists them.
func CPUs() int {
	b, _ := os.ReadFile("/proc/cpuinfo")
	return strings.Count(string(b), "processor\t:")
}

// BusyCPU is the host's busy CPU time since boot, over all CPUs and every
// process (user, nice, system, irq and softirq of /proc/stat; guest time
// is in user already), at the clock tick's resolution: the difference of
// two readings is what the host spent between them.
func BusyCPU() time.Duration {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	var ticks int64
	for i, v := range strings.Fields(line)[1:] {
		if i < 3 || i == 5 || i == 6 {
			n, _ := strconv.ParseInt(v, 10, 64)
			ticks += n
		}
	}
	return time.Duration(ticks) * time.Second / userHZ
}

// userHZ is the unit of /proc/stat's times (USER_HZ, 100 on Linux).
const userHZ = 100

// AtOnce runs f(0) … f(n-1) in n goroutines started together and returns
// each call's latency in ms from that common start, the time until the last
// returned, and the calls' errors joined.
func AtOnce(n int, f func(i int) error) ([]float64, time.Duration, error) {
	lat := make([]float64, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	t0 := time.Now()
	for i := range n {
		wg.Go(func() {
			errs[i] = f(i)
			lat[i] = MS(time.Since(t0))
		})
	}
	wg.Wait()
	return lat, time.Since(t0), errors.Join(errs...)
}
