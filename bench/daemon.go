package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/forkbox/forkbox/client"
	"github.com/forkbox/forkbox/internal/daemon"
	"github.com/forkbox/forkbox/internal/daemon/daemonproc"
)

// networkIndex keeps the bench daemon's sandbox networks (10.208.0.0/16,
// fbx7-*) apart from any other daemon on the machine; prevNetworkIndex is
// the previous build's daemon's (-prev-bin), which runs beside it.
const (
	networkIndex     = 7
	prevNetworkIndex = 11
)

// Daemon is a forkbox daemon started for the benchmark.
type Daemon struct {
	URL, Key, DataDir string
	Client            *client.Client
	LogPath           string
	Launcher          string // how it was started
	proc              *daemonproc.Proc
	runsc             string
	index             int // its --network-index
}

// startDaemon runs `<bin>/forkbox serve` when that binary exists, else this
// program itself in internal-daemon mode (internal/daemon.Run), as a child
// process either way, and waits until it answers /health.
// A build without `serve --host-hugepages` (an older one, -prev-bin) gets
// no such flag; extra are more serve flags.
func startDaemon(ctx context.Context, binDir, templateDir, tmp string, hugePages bool, index int, extra ...string) (*Daemon, error) {
	d := &Daemon{DataDir: filepath.Join(tmp, "daemon-data"), LogPath: filepath.Join(tmp, "daemon.log"),
		runsc: filepath.Join(binDir, "runsc"), index: index}
	args := []string{"--network-index", strconv.Itoa(index)}
	if serveHas(ctx, filepath.Join(binDir, "forkbox"), "host-hugepages") {
		args = append(args, "--host-hugepages="+strconv.FormatBool(hugePages))
	}
	args = append(args, extra...)
	o := daemonproc.Options{Bin: binDir, DataDir: d.DataDir, TemplateDir: templateDir,
		Args:         args,
		LogPath:      d.LogPath,
		ReadyTimeout: 10 * time.Minute,
		StopTimeout:  20 * time.Second,
		SysProcAttr:  &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM},
	}
	if !serveHas(ctx, filepath.Join(binDir, "forkbox"), "network-index") {
		self, err := os.Executable()
		if err != nil {
			return nil, err
		}
		o.Command = []string{self, internalDaemonArg}
	}
	slog.Info("starting daemon", "bin", binDir, "internal", o.Command != nil, "log", d.LogPath)
	p, err := daemonproc.Start(ctx, o)
	if err != nil {
		d.cleanup(context.WithoutCancel(ctx))
		return nil, err
	}
	argv := p.Cmdline()
	d.proc, d.URL, d.Key = p, p.URL, p.APIKey
	d.Launcher = filepath.Base(argv[0]) + " " + strings.Join(argv[1:], " ")
	d.Client = client.New(d.URL, d.Key)
	slog.Info("daemon ready", "cmd", d.Launcher)
	return d, nil
}

// serveHas reports whether the forkbox binary name exists and knows
// `serve --<flag>`.
func serveHas(ctx context.Context, name, flag string) bool {
	if _, err := os.Stat(name); err != nil {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, _ := exec.CommandContext(ctx, name, "serve", "--help").CombinedOutput()
	return strings.Contains(string(out), "--"+flag)
}

// Stop kills every sandbox the daemon knows, stops the daemon and removes
// whatever runsc containers and sandbox networks are left of it.
func (d *Daemon) Stop(ctx context.Context) {
	if d.proc != nil {
		if err := d.proc.Stop(ctx); err != nil {
			slog.Warn("stop daemon", "err", err)
		}
	}
	d.cleanup(ctx)
}

// cleanup removes the runsc containers and sandbox networks a stopped (or
// failed) daemon left.
func (d *Daemon) cleanup(ctx context.Context) {
	root := filepath.Join(d.DataDir, "runtime", "runsc")
	removeRunscContainers(ctx, d.runsc, root)
	removeDaemonNetworks(ctx, d.index)
}

// removeDaemonNetworks deletes namespaces, links and the nftables table of
// network index 7 that a crashed daemon may leave; they are this program's.
func removeDaemonNetworks(ctx context.Context, networkIndex int) {
	prefix := daemon.NetNSPrefix(networkIndex)
	out, _ := exec.CommandContext(ctx, "ip", "netns", "list").Output()
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) > 0 && strings.HasPrefix(f[0], prefix) {
			slog.Warn("removing leftover daemon namespace", "ns", f[0])
			exec.CommandContext(ctx, "ip", "netns", "del", f[0]).Run()
		}
	}
	out, _ = exec.CommandContext(ctx, "ip", "-o", "link", "show").Output()
	lp := fmt.Sprintf("fb%dh", networkIndex)
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) > 1 && strings.HasPrefix(f[1], lp) {
			exec.CommandContext(ctx, "ip", "link", "del", strings.SplitN(strings.TrimSuffix(f[1], ":"), "@", 2)[0]).Run()
		}
	}
	exec.CommandContext(ctx, "nft", "delete", "table", "inet", fmt.Sprintf("forkbox%d", networkIndex)).Run()
}

const internalDaemonArg = "internal-daemon"

// runInternalDaemon is the child-process mode that serves forkbox through
// internal/daemon.Run while `forkbox serve` does not exist yet.
func runInternalDaemon(args []string) error {
	fs := flag.NewFlagSet(internalDaemonArg, flag.ContinueOnError)
	var o daemon.Options
	fs.StringVar(&o.Listen, "listen", "127.0.0.1:3000", "")
	fs.StringVar(&o.DataDir, "data-dir", "", "")
	fs.StringVar(&o.TemplateDir, "template-dir", "", "")
	fs.StringVar(&o.RunscPath, "runsc", "", "")
	fs.StringVar(&o.AgentPath, "agent", "", "")
	fs.IntVar(&o.NetworkIndex, "network-index", 0, "")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	err := daemon.Run(ctx, o)
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// loggedDurations collects the took= values of the daemon's log lines
// whose message is msg (the daemon's own view of an operation).
func loggedDurations(path, msg string) samples {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var out samples
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.Contains(line, `msg="`+msg+`"`) {
			continue
		}
		_, rest, ok := strings.Cut(line, " took=")
		if !ok {
			continue
		}
		if d, err := time.ParseDuration(strings.Fields(rest)[0]); err == nil {
			out.addDur(d)
		}
	}
	return out
}
