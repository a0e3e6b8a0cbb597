package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
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
)

// networkIndex keeps the bench daemon's sandbox networks (10.208.0.0/16,
// fbx7-*) apart from any other daemon on the machine.
const networkIndex = 7

// Daemon is a forkbox daemon started for the benchmark.
type Daemon struct {
	URL, Key, DataDir string
	Client            *client.Client
	LogPath           string
	Launcher          string // how it was started
	cmd               *exec.Cmd
	runsc             string
}

// startDaemon runs `<bin>/forkbox serve` when that binary exists, else this
// program itself in internal-daemon mode (internal/daemon.Run), as a child
// process either way, and waits until it answers /health.
func startDaemon(ctx context.Context, binDir, templateDir, tmp string) (*Daemon, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	d := &Daemon{DataDir: filepath.Join(tmp, "daemon-data"), LogPath: filepath.Join(tmp, "daemon.log"),
		runsc: filepath.Join(binDir, "runsc")}
	listen := "127.0.0.1:" + strconv.Itoa(port)
	args := []string{"serve", "--listen", listen, "--data-dir", d.DataDir, "--template-dir", templateDir,
		"--runsc", d.runsc, "--agent", filepath.Join(binDir, "forkbox-agent"),
		"--network-index", strconv.Itoa(networkIndex)}
	name := filepath.Join(binDir, "forkbox")
	if !hasServe(ctx, name) {
		if name, err = os.Executable(); err != nil {
			return nil, err
		}
		args[0] = internalDaemonArg
	}
	d.Launcher = filepath.Base(name) + " " + strings.Join(args, " ")
	logf, err := os.Create(d.LogPath)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	d.cmd = exec.Command(name, args...)
	d.cmd.Stdout, d.cmd.Stderr = logf, logf
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	slog.Info("starting daemon", "cmd", d.Launcher, "log", d.LogPath)
	if err := d.cmd.Start(); err != nil {
		return nil, err
	}
	d.URL = "http://" + listen
	if err := d.waitReady(ctx, 10*time.Minute); err != nil {
		d.Stop(context.WithoutCancel(ctx))
		return nil, err
	}
	return d, nil
}

// hasServe reports whether bin/forkbox exists and knows `serve --network-index`.
func hasServe(ctx context.Context, name string) bool {
	if _, err := os.Stat(name); err != nil {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, _ := exec.CommandContext(ctx, name, "serve", "--help").CombinedOutput()
	return strings.Contains(string(out), "network-index")
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// waitReady polls /health and then reads the API key.
func (d *Daemon) waitReady(ctx context.Context, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	exited := make(chan struct{})
	go func() { d.cmd.Process.Wait(); close(exited) }()
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return fmt.Errorf("daemon exited during start-up; see %s", d.LogPath)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		resp, err := http.Get(d.URL + "/health")
		if err != nil {
			continue
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			key, err := os.ReadFile(filepath.Join(d.DataDir, "api-key"))
			if err != nil {
				return fmt.Errorf("read api key: %w", err)
			}
			d.Key = strings.TrimSpace(string(key))
			d.Client = client.New(d.URL, d.Key)
			return nil
		}
	}
	return fmt.Errorf("daemon not ready after %s; see %s", limit, d.LogPath)
}

// Stop kills every sandbox the daemon knows, stops the daemon and removes
// whatever runsc containers and sandbox networks are left of it.
func (d *Daemon) Stop(ctx context.Context) {
	if d.Client != nil {
		killAll(ctx, d.Client)
	}
	if d.cmd != nil && d.cmd.Process != nil {
		d.cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { d.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			slog.Warn("daemon did not stop on SIGTERM; killing it")
			d.cmd.Process.Kill()
			<-done
		}
	}
	root := filepath.Join(d.DataDir, "runtime", "runsc")
	removeRunscContainers(ctx, d.runsc, root)
	removeDaemonNetworks(ctx)
}

// killAll deletes every running or paused sandbox.
func killAll(ctx context.Context, c *client.Client) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for range 5 {
		list, _, err := c.ListSandboxes(ctx, client.ListOptions{State: []string{"running", "paused"}, Limit: 100})
		if err != nil || len(list) == 0 {
			return
		}
		for _, sb := range list {
			if err := c.KillSandbox(ctx, sb.SandboxID); err != nil && !client.IsNotFound(err) {
				slog.Warn("kill sandbox at cleanup", "sandbox", sb.SandboxID, "err", err)
			}
		}
	}
}

// removeDaemonNetworks deletes namespaces, links and the nftables table of
// network index 7 that a crashed daemon may leave; they are this program's.
func removeDaemonNetworks(ctx context.Context) {
	prefix := fmt.Sprintf("fbx%d-", networkIndex)
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
