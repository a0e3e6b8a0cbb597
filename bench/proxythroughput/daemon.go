package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// daemon is the `forkbox serve` this program started.
type daemon struct {
	url, key, dataDir string
	tmp               string
	cmd               *exec.Cmd
	exited            chan struct{}
}

// startDaemon runs <bin>/forkbox serve with a temporary data dir and waits
// until it answers /health.
func startDaemon(ctx context.Context, c config) (*daemon, error) {
	tmp, err := os.MkdirTemp("", "forkbox-proxybench-")
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	listen := ln.Addr().String()
	ln.Close()
	d := &daemon{url: "http://" + listen, dataDir: filepath.Join(tmp, "data"), tmp: tmp, exited: make(chan struct{})}
	logf, err := os.Create(filepath.Join(tmp, "daemon.log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	d.cmd = exec.Command(filepath.Join(c.bin, "forkbox"), "serve", "--listen", listen,
		"--data-dir", d.dataDir, "--template-dir", c.templateDir,
		"--runsc", filepath.Join(c.bin, "runsc"), "--agent", filepath.Join(c.bin, "forkbox-agent"),
		"--network-index", strconv.Itoa(c.networkIndex))
	d.cmd.Stdout, d.cmd.Stderr = logf, logf
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	slog.Info("starting daemon", "listen", listen, "log", logf.Name())
	if err := d.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start daemon: %w", err)
	}
	go func() { d.cmd.Wait(); close(d.exited) }()
	if err := d.waitReady(ctx, 5*time.Minute); err != nil {
		d.stop()
		return nil, err
	}
	return d, nil
}

func (d *daemon) waitReady(ctx context.Context, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		select {
		case <-d.exited:
			return fmt.Errorf("daemon exited during start-up; see %s/daemon.log", d.tmp)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		resp, err := http.Get(d.url + "/health")
		if err != nil {
			continue
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			key, err := os.ReadFile(filepath.Join(d.dataDir, "api-key"))
			if err != nil {
				return fmt.Errorf("read api key: %w", err)
			}
			d.key = strings.TrimSpace(string(key))
			return nil
		}
	}
	return fmt.Errorf("daemon not ready after %s", limit)
}

// stop terminates the daemon, unmounts what its runtime left under the
// temporary dir, and removes the dir.
func (d *daemon) stop() {
	d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
	case <-time.After(15 * time.Second):
		d.cmd.Process.Kill()
		<-d.exited
	}
	for _, m := range mountsUnder(d.tmp) {
		for unix.Unmount(m, unix.MNT_DETACH) == nil {
		}
	}
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

// mountsUnder lists the mount points below dir, deepest first.
func mountsUnder(dir string) []string {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) >= 5 && strings.HasPrefix(f[4], dir+"/") {
			out = append([]string{f[4]}, out...)
		}
	}
	return out
}
