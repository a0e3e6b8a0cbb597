// Command jupyterserver measures what a Jupyter server between the code
// interpreter and its kernels would cost (issue 17: "through a Jupyter
// server in the sandbox or straight to the kernels' ZeroMQ sockets; choose
// by measured idle memory and latency"): the idle memory of Debian's
// jupyter_server (python3-jupyter-server) and the `x+1` round trip through
// it (WebSocket → server → ZeroMQ → kernel, as E2B's interpreter talks to
// its kernels) against the code interpreter's own path (HTTP /execute →
// ZeroMQ → kernel), on the host, with the same IPython kernel started from
// forkbox's kernelspec. It prints a Markdown section for docs/benchmarks.md.
//
//	go run ./bench/jupyterserver [-n 200] [-python /usr/bin/python3]
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/forkbox/forkbox/internal/guest/codeinterp"
	"github.com/forkbox/forkbox/internal/guest/codeinterp/kerneltest"
)

func main() {
	n := flag.Int("n", 200, "round trips per path (after 10 warm-up calls)")
	py := flag.String("python", "/usr/bin/python3", "Debian's python3, with python3-ipykernel and python3-jupyter-server")
	flag.Parse()
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, nil)))
	if err := run(*py, *n); err != nil {
		slog.Error("jupyterserver", "err", err)
		os.Exit(1)
	}
}

func run(py string, n int) error {
	if out, err := exec.Command(py, "-c", "import jupyter_server, ipykernel").CombinedOutput(); err != nil {
		return fmt.Errorf("%s lacks jupyter_server or ipykernel (apt-get install python3-jupyter-server python3-ipykernel): %v: %s", py, err, out)
	}
	dir, err := os.MkdirTemp("", "forkbox-jupyterserver-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	cfg := codeinterp.Config{Python: py}
	files, err := codeinterp.KernelSpecs(cfg, dir)
	if err != nil {
		return err
	}
	if err := kerneltest.WriteFiles(dir, files); err != nil {
		return err
	}
	start := time.Now()
	direct, err := directRTT(cfg, n)
	if err != nil {
		return fmt.Errorf("direct path: %w", err)
	}
	var via [2][]time.Duration
	var idle int64
	for i, nodelay := range []bool{false, true} {
		srv, err := startServer(py, dir, nodelay)
		if err != nil {
			return err
		}
		if !nodelay {
			idle, err = srv.idleRSS()
		}
		if err == nil {
			via[i], err = srv.rtt(n)
		}
		srv.stop()
		if err != nil {
			return fmt.Errorf("through the server (nodelay %t): %w", nodelay, err)
		}
	}
	report(os.Stdout, n, direct, via, idle, time.Since(start))
	return nil
}

// nodelayConfig is a jupyter_server config file that sets TCP_NODELAY on
// the kernel channels' WebSockets, which jupyter_server 1.23 leaves off:
// tornado then holds small messages back until the peer's delayed ACK
// (Nagle), about 40 ms per round trip.
const nodelayConfig = `from jupyter_server.services.kernels.handlers import ZMQChannelsHandler as _H
_open = _H.open
def _open_nodelay(self, *args, **kwargs):
    self.set_nodelay(True)
    return _open(self, *args, **kwargs)
_H.open = _open_nodelay
`

// directRTT is the code interpreter's own path: POST /execute `x+1` to a
// codeinterp.Server on loopback, which speaks ZeroMQ to the kernel.
func directRTT(cfg codeinterp.Config, n int) ([]time.Duration, error) {
	s := codeinterp.New(cfg)
	defer s.Close()
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()
	call := func(code string) error {
		resp, err := http.Post(ts.URL+"/execute", "application/json", strings.NewReader(`{"code":"`+code+`"}`))
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err == nil && !strings.Contains(string(b), "end_of_execution") {
			err = fmt.Errorf("no end_of_execution in %q", b)
		}
		return err
	}
	return timeCalls(n, func() error { return call("x = 1") }, func() error { return call("x+1") })
}

// timeCalls runs setup, ten untimed calls and n timed ones.
func timeCalls(n int, setup, call func() error) ([]time.Duration, error) {
	if err := setup(); err != nil {
		return nil, err
	}
	var out []time.Duration
	for i := range n + 10 {
		t0 := time.Now()
		if err := call(); err != nil {
			return nil, err
		}
		if i >= 10 {
			out = append(out, time.Since(t0))
		}
	}
	return out, nil
}

// freePort returns a free loopback port.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// server is a running jupyter_server.
type server struct {
	cmd   *exec.Cmd
	base  string // http://127.0.0.1:port
	token string
}

// startServer runs Debian's jupyter_server with dir as its only Jupyter
// path (so it finds forkbox's kernelspecs and writes nothing elsewhere),
// with nodelayConfig when nodelay.
func startServer(py, dir string, nodelay bool) (*server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	configDir := filepath.Join(dir, fmt.Sprintf("config-nodelay-%t", nodelay))
	if err := os.MkdirAll(configDir, 0o755); err != nil {
		return nil, err
	}
	if nodelay {
		if err := os.WriteFile(filepath.Join(configDir, "jupyter_server_config.py"), []byte(nodelayConfig), 0o644); err != nil {
			return nil, err
		}
	}
	s := &server{base: fmt.Sprintf("http://127.0.0.1:%d", port), token: "forkbox-bench"}
	s.cmd = exec.Command(py, "-m", "jupyter_server", "--no-browser", "--allow-root", fmt.Sprintf("--ServerApp.port=%d", port),
		"--ServerApp.ip=127.0.0.1", "--ServerApp.token="+s.token, "--ServerApp.root_dir="+dir)
	s.cmd.Env = append(os.Environ(), "JUPYTER_PATH="+dir, "JUPYTER_CONFIG_DIR="+configDir,
		"JUPYTER_DATA_DIR="+filepath.Join(dir, "data"), "JUPYTER_RUNTIME_DIR="+filepath.Join(dir, "runtime"))
	s.cmd.Stdout, s.cmd.Stderr = io.Discard, io.Discard
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start jupyter_server: %w", err)
	}
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(s.base + "/api/status?token=" + s.token); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s, nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.stop()
	return nil, fmt.Errorf("jupyter_server did not answer /api/status within a minute")
}

func (s *server) stop() {
	syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	s.cmd.Wait()
}

// idleRSS is the server's resident memory after 3 s without a kernel.
func (s *server) idleRSS() (int64, error) {
	time.Sleep(3 * time.Second)
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			var kb int64
			fmt.Sscanf(strings.TrimSpace(v), "%d", &kb)
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("no VmRSS for the server")
}

// report prints the Markdown section.
func report(w io.Writer, n int, direct []time.Duration, via [2][]time.Duration, idle int64, took time.Duration) {
	p := func(ds []time.Duration, q float64) string {
		s := append([]time.Duration(nil), ds...)
		sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
		return fmt.Sprintf("%.2f", float64(s[int(q*float64(len(s)-1))].Microseconds())/1000)
	}
	fmt.Fprintf(w, "## Jupyter server vs direct ZeroMQ (bench/jupyterserver, host)\n\n")
	fmt.Fprintf(w, "`go run ./bench/jupyterserver -n %d` (%s, %d CPUs, run took %s): the same IPython kernel (forkbox's "+
		"kernelspec, `forkbox_kernel.py`), `x+1` until idle and the reply, n = %d after 10 warm-up calls.\n\n",
		n, time.Now().UTC().Format("2006-01-02 15:04 MST"), runtime.NumCPU(), took.Round(time.Second), n)
	fmt.Fprintf(w, "| path | p50 ms | p90 ms |\n|---|---:|---:|\n")
	fmt.Fprintf(w, "| code interpreter: HTTP `/execute` → ZeroMQ → kernel | %s | %s |\n", p(direct, .5), p(direct, .9))
	fmt.Fprintf(w, "| WebSocket → Debian's jupyter_server 1.23 → ZeroMQ → kernel | %s | %s |\n", p(via[0], .5), p(via[0], .9))
	fmt.Fprintf(w, "| the same, TCP_NODELAY set on the WebSocket (a config-file patch) | %s | %s |\n\n", p(via[1], .5), p(via[1], .9))
	fmt.Fprintf(w, "jupyter_server's own resident memory, idle without a kernel: **%.1f MiB**.\n\n", float64(idle)/(1<<20))
}

// rtt creates a kernel in the server and times `x+1` over its channels
// WebSocket.
func (s *server) rtt(n int) ([]time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	ch, err := s.openKernel(ctx)
	if err != nil {
		return nil, err
	}
	defer ch.Close()
	return timeCalls(n, func() error { return ch.execute("x = 1") }, func() error { return ch.execute("x+1") })
}
