// Command proxythroughput measures the throughput of forkbox's port proxy:
// a file served by `python3 -m http.server` in a sandbox is downloaded
// through the daemon (plain HTTP, Host <port>-<id>.<domain>) and straight
// from the sandbox's address, several times each, and the medians and
// their ratio are printed as a markdown section (for docs/benchmarks.md).
//
// It starts its own daemon (<bin>/forkbox serve, as root) on a free
// loopback port with a temporary data dir and its own sandbox network, and
// removes everything it made when done.
//
//	go run ./bench/proxythroughput -bin ./bin >> docs/benchmarks.md
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/forkbox/forkbox/bench/benchd"
	"github.com/forkbox/forkbox/client"
)

// config holds the flags.
type config struct {
	daemon        benchd.Options
	sizeMiB, runs int
	port          int
}

func main() {
	var c config
	c.daemon.Flags(9)
	flag.IntVar(&c.sizeMiB, "size", 100, "MiB to download per run")
	flag.IntVar(&c.runs, "runs", 5, "runs per path")
	flag.IntVar(&c.port, "port", 8000, "port of the HTTP server in the sandbox")
	flag.Parse()
	benchd.Main("proxythroughput", func(ctx context.Context) error { return run(ctx, c) })
}

func run(ctx context.Context, c config) error {
	d, err := benchd.Start(ctx, c.daemon.Named("proxy"))
	if err != nil {
		return err
	}
	defer d.Stop()
	cl := client.New(d.URL, d.Key)
	sb, err := cl.CreateSandbox(ctx, client.CreateOptions{TemplateID: "base", Timeout: 30 * time.Minute})
	if err != nil {
		return fmt.Errorf("create sandbox: %w", err)
	}
	defer cl.KillSandbox(context.WithoutCancel(ctx), sb.SandboxID)
	stopServer, err := startServer(ctx, sb.Conn(), c)
	if err != nil {
		return err
	}
	defer stopServer()
	addr, err := d.SandboxAddr(sb.SandboxID)
	if err != nil {
		return err
	}
	paths := []path{
		{name: "through the proxy", url: d.URL + "/blob", host: fmt.Sprintf("%d-%s.forkbox.bench", c.port, sb.SandboxID)},
		{name: "straight to the sandbox", url: fmt.Sprintf("http://%s:%d/blob", addr, c.port)},
	}
	if err := measure(ctx, paths, c, d.Proc.Pid()); err != nil {
		return err
	}
	report(os.Stdout, paths, c)
	return nil
}

// startServer makes the file and runs the HTTP server in the sandbox until
// the returned function is called, once it answers.
func startServer(ctx context.Context, conn *client.SandboxConn, c config) (func(), error) {
	mk := fmt.Sprintf("mkdir -p /home/user/www && head -c %dM /dev/zero > /home/user/www/blob", c.sizeMiB)
	if code, err := conn.Exec(ctx, client.ExecOptions{Shell: mk}); err != nil || code != 0 {
		return nil, fmt.Errorf("make the file (exit %d): %w", code, err)
	}
	srvCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		conn.Exec(srvCtx, client.ExecOptions{Shell: fmt.Sprintf(
			"exec python3 -m http.server %d --bind 0.0.0.0 --directory /home/user/www", c.port)})
	}()
	stopFn := func() { cancel(); <-done }
	wait := fmt.Sprintf("for i in $(seq 100); do python3 -c \"import socket; socket.create_connection(('127.0.0.1', %d), 1)\" 2>/dev/null && exit 0; sleep 0.1; done; exit 1", c.port)
	if code, err := conn.Exec(ctx, client.ExecOptions{Shell: wait}); err != nil || code != 0 {
		stopFn()
		return nil, fmt.Errorf("http.server did not listen (exit %d): %w", code, err)
	}
	return stopFn, nil
}

// path is one way to the file and what it measured.
type path struct {
	name, url, host string
	times           []time.Duration
	daemonCPU       time.Duration // the daemon's CPU time over the measured runs
}

// measure downloads the file over each path c.runs times, interleaved so
// drift of the machine hits both alike, after one warm-up each.
func measure(ctx context.Context, paths []path, c config, daemonPID int) error {
	want := int64(c.sizeMiB) << 20
	for i := -1; i < c.runs; i++ {
		for j := range paths {
			p := &paths[j]
			cpu0 := cpuTime(daemonPID)
			took, err := download(ctx, p, want)
			if err != nil {
				return err
			}
			if i >= 0 {
				p.times = append(p.times, took)
				p.daemonCPU += cpuTime(daemonPID) - cpu0
			}
			slog.Info("download", "path", p.name, "run", i, "took", took.Round(time.Millisecond))
		}
	}
	return nil
}

// download fetches p.url once over a fresh connection and checks its size.
func download(ctx context.Context, p *path, want int64) (time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.url, nil)
	if err != nil {
		return 0, err
	}
	if p.host != "" {
		req.Host = p.host
	}
	tr := &http.Transport{DisableCompression: true, DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	start := time.Now()
	resp, err := tr.RoundTrip(req)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", p.name, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return 0, fmt.Errorf("%s: %s: %s", p.name, resp.Status, b)
	}
	n, err := io.Copy(io.Discard, resp.Body)
	took := time.Since(start)
	if err != nil {
		return 0, fmt.Errorf("%s: read: %w", p.name, err)
	}
	if n != want {
		return 0, fmt.Errorf("%s: got %d bytes, want %d", p.name, n, want)
	}
	return took, nil
}

func median(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}

func mibps(sizeMiB int, d time.Duration) float64 { return float64(sizeMiB) / d.Seconds() }

// report prints the markdown section.
func report(w io.Writer, paths []path, c config) {
	fmt.Fprintf(w, "\n## Port proxy throughput\n\n")
	fmt.Fprintf(w, "A %d MiB file (`head -c %dM /dev/zero`) served by `python3 -m http.server` in a `base` sandbox, "+
		"downloaded by a Go client on the host over a new connection each time, %d runs per path (interleaved, after one warm-up each): "+
		"through the daemon's port proxy (plain HTTP, `Host: %d-<id>.<domain>`) and straight from the sandbox's address "+
		"(`addr` of the runtime's handle.json). Measured %s on %d CPUs (%s/%s), load average %s, with `go run ./bench/proxythroughput`.\n\n",
		c.sizeMiB, c.sizeMiB, c.runs, c.port, time.Now().UTC().Format("2006-01-02"), runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, loadAvg())
	fmt.Fprintf(w, "| path | median time | median MiB/s | best MiB/s | daemon CPU per run | all runs (s) |\n|---|---:|---:|---:|---:|---|\n")
	for _, p := range paths {
		m := median(p.times)
		var all []string
		for _, t := range p.times {
			all = append(all, fmt.Sprintf("%.2f", t.Seconds()))
		}
		fmt.Fprintf(w, "| %s | %s | %.0f | %.0f | %s | %s |\n", p.name, m.Round(time.Millisecond),
			mibps(c.sizeMiB, m), mibps(c.sizeMiB, slices.Min(p.times)),
			(p.daemonCPU / time.Duration(len(p.times))).Round(time.Millisecond), strings.Join(all, ", "))
	}
	ratio := median(paths[1].times).Seconds() / median(paths[0].times).Seconds()
	best := slices.Min(paths[1].times).Seconds() / slices.Min(paths[0].times).Seconds()
	verdict := "meets"
	if ratio < 0.8 {
		verdict = "misses"
	}
	fmt.Fprintf(w, "\nThroughput ratio proxy / direct: **%.2f** of the medians (%s the target ≥ 0.8), %.2f of the best runs.\n", ratio, verdict, best)
}

// cpuTime returns the user+system CPU time process pid has used (0 if
// unknown), from /proc/<pid>/stat in clock ticks of 10 ms.
func cpuTime(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	_, rest, _ := strings.Cut(string(b), ") ") // after the command name
	f := strings.Fields(rest)
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.Atoi(f[11])
	stime, _ := strconv.Atoi(f[12])
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// loadAvg returns the 1, 5 and 15 minute load averages of the machine.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:min(3, len(f))], " ")
}
