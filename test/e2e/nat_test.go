package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/forkbox/forkbox/client"
	"github.com/forkbox/forkbox/internal/netns/testnet"
)

// The outside world of the NAT test: a network namespace this test creates,
// joined to the host by a veth pair, on a /30 of TEST-NET-2
// (198.51.100.0/24: not a private range, so sandboxes may reach it). Tests send traffic only
// to loopback and to namespaces they create.
const (
	natNS       = "fbe2e-out"
	natHostLink = "fbe2e-h"
	natNSLink   = "fbe2e-n"
	natHostIP   = "198.51.100.241"
	natNSIP     = "198.51.100.242"
	natPort     = 8089
)

func ipCmd(t *testing.T, args ...string) {
	t.Helper()
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// natCleanup removes what setupOutsideNS creates; errors mean "not there".
func natCleanup() {
	exec.Command("ip", "link", "del", natHostLink).Run()
	exec.Command("ip", "netns", "del", natNS).Run()
}

// setupOutsideNS creates the outside namespace and its veth link.
func setupOutsideNS(t *testing.T) {
	t.Helper()
	testnet.Lock(t) // its names are fixed: one run at a time
	natCleanup()    // leftovers of an interrupted run
	t.Cleanup(natCleanup)
	ipCmd(t, "netns", "add", natNS)
	ipCmd(t, "link", "add", natHostLink, "type", "veth", "peer", "name", natNSLink, "netns", natNS)
	ipCmd(t, "addr", "add", natHostIP+"/30", "dev", natHostLink)
	ipCmd(t, "link", "set", natHostLink, "up")
	ipCmd(t, "-n", natNS, "addr", "add", natNSIP+"/30", "dev", natNSLink)
	ipCmd(t, "-n", natNS, "link", "set", natNSLink, "up")
	ipCmd(t, "-n", natNS, "link", "set", "lo", "up")
	// No traffic before the host is known to reach the address through
	// this test's own veth.
	if out, err := exec.Command("ip", "route", "get", natNSIP).CombinedOutput(); err != nil || !strings.Contains(string(out), "dev "+natHostLink+" ") {
		t.Fatalf("ip route get %s: %v %s, want dev %s", natNSIP, err, out, natHostLink)
	}
}

// listenInNS opens a TCP listener inside the named network namespace. The
// socket keeps its namespace; the OS thread that entered the namespace is
// left locked so the runtime discards it instead of reusing it.
func listenInNS(ns, addr string) (net.Listener, error) {
	type result struct {
		ln  net.Listener
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
		f, err := os.Open("/var/run/netns/" + ns)
		if err != nil {
			ch <- result{err: err}
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			ch <- result{err: fmt.Errorf("setns %s: %w", ns, err)}
			return
		}
		ln, err := net.Listen("tcp4", addr)
		ch <- result{ln, err}
	}()
	r := <-ch
	return r.ln, r.err
}

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// TestOutboundNAT: a sandbox reaches a server outside the host through the
// daemon's NAT, and the server sees the host's address, not the sandbox's.
func TestOutboundNAT(t *testing.T) {
	setupOutsideNS(t)
	ln, err := listenInNS(natNS, fmt.Sprintf("%s:%d", natNSIP, natPort))
	if err != nil {
		t.Fatalf("listen in %s: %v", natNS, err)
	}
	token := "forkbox-nat-" + randHex(8)
	var (
		mu      sync.Mutex
		sources []string
	)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		sources = append(sources, r.RemoteAddr)
		mu.Unlock()
		fmt.Fprint(w, token)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	// The host reaches it directly (checks the test's own plumbing).
	hc := &http.Client{Timeout: 3 * time.Second}
	resp, err := hc.Get(fmt.Sprintf("http://%s:%d/", natNSIP, natPort))
	if err != nil {
		t.Fatalf("host → outside namespace: %v (test setup broken)", err)
	}
	resp.Body.Close()
	mu.Lock()
	sources = nil
	mu.Unlock()

	d := startDaemon(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := client.New(d.URL, d.APIKey)
	start := time.Now()
	sb, err := c.CreateSandbox(ctx, client.CreateOptions{TemplateID: "base", Timeout: 2 * time.Minute})
	if err != nil {
		t.Fatalf("create sandbox: %v", err)
	}
	t.Logf("sandbox %s created in %s", sb.SandboxID, time.Since(start).Round(time.Millisecond))
	defer c.KillSandbox(context.Background(), sb.SandboxID)

	var stdout, stderr strings.Builder
	cmdline := fmt.Sprintf("curl -sS -m 5 http://%s:%d/", natNSIP, natPort)
	code, err := sb.Conn().Exec(ctx, client.ExecOptions{Shell: cmdline, Stdout: &stdout, Stderr: &stderr})
	if err != nil {
		t.Fatalf("exec %q: %v", cmdline, err)
	}
	if code != 0 || stdout.String() != token {
		var route strings.Builder
		sb.Conn().Exec(ctx, client.ExecOptions{Shell: "ip -4 addr; ip route", Stdout: &route, Stderr: &route})
		t.Fatalf("sandbox → %s:%d: exit %d, stdout %q (want %q), stderr %q\nin the sandbox:\n%s",
			natNSIP, natPort, code, stdout.String(), token, stderr.String(), route.String())
	}
	mu.Lock()
	defer mu.Unlock()
	if len(sources) != 1 {
		t.Fatalf("outside server saw %d requests (%v), want 1", len(sources), sources)
	}
	host, _, _ := net.SplitHostPort(sources[0])
	if host != natHostIP {
		t.Errorf("outside server saw source %s, want the host's address %s (masquerade)", host, natHostIP)
	}
	t.Logf("sandbox reached %s:%d through NAT as %s", natNSIP, natPort, sources[0])
}
