package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/forkbox/forkbox/internal/daemon/daemonproc"
)

// daemon is the `forkbox serve` this program started.
type daemon struct {
	url, key, dataDir string
	tmp               string
	networkIndex      int
	proc              *daemonproc.Proc
}

// startDaemon runs <bin>/forkbox serve with a temporary data dir and waits
// until it answers /health.
func startDaemon(ctx context.Context, c config) (*daemon, error) {
	tmp, err := os.MkdirTemp("", "forkbox-proxybench-")
	if err != nil {
		return nil, err
	}
	d := &daemon{dataDir: filepath.Join(tmp, "data"), tmp: tmp, networkIndex: c.networkIndex}
	logPath := filepath.Join(tmp, "daemon.log")
	slog.Info("starting daemon", "log", logPath)
	d.proc, err = daemonproc.Start(ctx, daemonproc.Options{
		Bin: c.bin, DataDir: d.dataDir, TemplateDir: c.templateDir,
		Args:         []string{"--network-index", strconv.Itoa(c.networkIndex)},
		LogPath:      logPath,
		ReadyTimeout: 5 * time.Minute,
		StopTimeout:  15 * time.Second,
		SysProcAttr:  &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM},
	})
	if err != nil {
		d.removeTmp()
		return nil, fmt.Errorf("start daemon: %w", err)
	}
	d.url, d.key = d.proc.URL, d.proc.APIKey
	slog.Info("daemon ready", "url", d.url)
	return d, nil
}

// stop kills the daemon's sandboxes, terminates it, unmounts what its
// runtime left under the temporary dir, and removes the dir.
func (d *daemon) stop() {
	if err := d.proc.Stop(context.Background()); err != nil {
		slog.Warn("stop daemon", "err", err)
	}
	// The daemon keeps its firewall table across restarts on purpose; a
	// benchmark's daemon is gone for good.
	exec.Command("nft", "delete", "table", "inet", fmt.Sprintf("forkbox%d", d.networkIndex)).Run()
	d.removeTmp()
}

// removeTmp unmounts everything under the temporary dir and removes it.
func (d *daemon) removeTmp() {
	daemonproc.UnmountUnder(d.tmp)
	if err := os.RemoveAll(d.tmp); err != nil {
		slog.Warn("remove bench dir", "dir", d.tmp, "err", err)
	}
}

// sandboxAddr reads the sandbox's address from the runtime's handle
// (<data>/runtime/sandboxes/<runtime id>/handle.json, field addr).
func (d *daemon) sandboxAddr(id string) (string, error) {
	files, err := filepath.Glob(filepath.Join(d.dataDir, "runtime", "sandboxes", "*", "handle.json"))
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
	return "", fmt.Errorf("sandbox %s in %s: %w", id, d.dataDir, errNoHandle)
}
