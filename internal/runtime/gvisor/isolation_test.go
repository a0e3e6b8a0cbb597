package gvisor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	goruntime "runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"

	"github.com/forkbox/forkbox/internal/netns/testnet"
	"github.com/forkbox/forkbox/internal/runtime"
	"github.com/forkbox/forkbox/internal/runtime/runtimetest"
)

// The "outside world" of the isolation test: a namespace the test creates,
// numbered in a /30 of TEST-NET-2 (198.51.100.0/24: public as far as the
// drop rules go, reserved for documentation, and never routed beyond this
// host), under testnet's host-wide lock like every user of that range.
const (
	outsideNS   = "fbtest-out"
	outsideLink = "fbo-test" // no prefix any Manager matches
	outsideHost = "198.51.100.245"
	outsideAddr = "198.51.100.246"
)

// testSpec is a sandbox running the test server.
func testSpec(id string, internet bool) runtime.Spec {
	return runtime.Spec{
		ID: id, RootFS: env.rootfs, Args: runtimetest.PythonServerArgs(testPort),
		Hostname: "iso", AllowInternet: internet,
	}
}

// startSandbox creates a sandbox deleted at test end and waits until it
// answers.
func startSandbox(t *testing.T, r *Runtime, spec runtime.Spec) runtime.Info {
	t.Helper()
	info, err := r.Create(context.Background(), spec)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	t.Cleanup(func() { r.Delete(context.Background(), spec.ID) })
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := get(r, spec.ID, "/procs"); err == nil {
			return info
		} else if time.Now().After(deadline) {
			t.Fatalf("sandbox %s never answered: %v", spec.ID, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// get does one HTTP GET to the test server of id.
func get(r *Runtime, id, path string) (string, error) {
	return getWithin(r, id, path, 10*time.Second)
}

// getWithin is get with another timeout.
func getWithin(r *Runtime, id, path string, timeout time.Duration) (string, error) {
	client := &http.Client{Timeout: timeout, Transport: &http.Transport{
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return r.Dial(ctx, id, testPort)
		},
	}}
	resp, err := client.Get("http://sandbox" + path)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// serve accepts on ln, answers "ok" and records the last peer address.
func serve(ln net.Listener) func() string {
	var mu sync.Mutex
	var last string
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			last = c.RemoteAddr().(*net.TCPAddr).IP.String()
			mu.Unlock()
			c.Write([]byte("ok"))
			c.Close()
		}
	}()
	return func() string { mu.Lock(); defer mu.Unlock(); return last }
}

// listenHost opens a listener in the test's own namespace.
func listenHost(t *testing.T, addr string) (net.Listener, int) {
	t.Helper()
	ln, err := net.Listen("tcp4", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	serve(ln)
	return ln, ln.Addr().(*net.TCPAddr).Port
}

func TestIsolation(t *testing.T) {
	setup(t)
	r, err := newGvisor()
	if err != nil {
		t.Fatal(err)
	}
	outLn, lastPeer := makeOutside(t)
	_, loPort := listenHost(t, "127.0.0.1:0")
	_, anyPort := listenHost(t, "0.0.0.0:0")

	a := startSandbox(t, r, testSpec(runtimetest.NewID(), true))
	b := startSandbox(t, r, testSpec(runtimetest.NewID(), false))
	leaseA, _ := env.net.Get(a.ID)
	leaseB, _ := env.net.Get(b.ID)
	outside := outLn.Addr().String()

	checks := []struct {
		name, from, addr, want string
	}{
		{"internet sandbox reaches the outside", a.ID, outside, "open"},
		{"sandbox without internet does not", b.ID, outside, "closed"},
		{"host loopback service", a.ID, fmt.Sprintf("127.0.0.1:%d", loPort), "closed"},
		{"own host-side veth address", a.ID, fmt.Sprintf("%s:%d", leaseA.HostAddr, anyPort), "closed"},
		{"other sandbox's host-side address", a.ID, fmt.Sprintf("%s:%d", leaseB.HostAddr, anyPort), "closed"},
		{"other sandbox", a.ID, fmt.Sprintf("%s:%d", b.Addr, testPort), "closed"},
		{"other sandbox, reverse", b.ID, fmt.Sprintf("%s:%d", a.Addr, testPort), "closed"},
	}
	for _, c := range checks {
		got, err := get(r, c.from, "/probe?addr="+c.addr)
		if err != nil || got != c.want {
			t.Errorf("%s (%s): %q, %v; want %q", c.name, c.addr, got, err, c.want)
		}
	}
	if peer := lastPeer(); peer != outsideHost {
		t.Errorf("outside server saw %q, want the NAT address %s", peer, outsideHost)
	}
	procs, err := get(r, a.ID, "/procs")
	if err != nil {
		t.Fatal(err)
	}
	if pids := strings.Fields(procs); len(pids) > 3 || pids[0] != "1" {
		t.Errorf("sandbox sees processes %v, want only its own", pids)
	}
}

// makeOutside creates the outside namespace with a listener on
// outsideAddr:8080; everything is removed at test end.
func makeOutside(t *testing.T) (net.Listener, func() string) {
	t.Helper()
	testnet.Lock(t)
	removeOutside()
	t.Cleanup(removeOutside)
	ns, err := newNamedNS(outsideNS)
	if err != nil {
		t.Fatalf("create %s: %v", outsideNS, err)
	}
	defer ns.Close()
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: outsideLink}, PeerName: "eth0",
		PeerNamespace: netlink.NsFd(int(ns))}
	if err := netlink.LinkAdd(veth); err != nil {
		t.Fatal(err)
	}
	host, _ := netlink.LinkByName(outsideLink)
	mustNL(t, netlink.AddrAdd(host, mustAddr(outsideHost+"/30")))
	mustNL(t, netlink.LinkSetUp(host))
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	eth, _ := h.LinkByName("eth0")
	lo, _ := h.LinkByName("lo")
	mustNL(t, h.AddrAdd(eth, mustAddr(outsideAddr+"/30")))
	mustNL(t, h.LinkSetUp(eth))
	mustNL(t, h.LinkSetUp(lo))
	// No traffic before the host is known to reach the address through
	// this test's own veth.
	if routes, err := netlink.RouteGet(net.ParseIP(outsideAddr)); err != nil || len(routes) == 0 || routes[0].LinkIndex != host.Attrs().Index {
		t.Fatalf("route to %s: %+v %v, want link %s", outsideAddr, routes, err, outsideLink)
	}
	var ln net.Listener
	inNS(t, ns, func() { ln, err = net.Listen("tcp4", outsideAddr+":8080") })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln, serve(ln)
}

// removeOutside deletes the outside namespace and link if they exist.
func removeOutside() {
	if l, err := netlink.LinkByName(outsideLink); err == nil {
		netlink.LinkDel(l)
	}
	vnetns.DeleteNamed(outsideNS)
	os.Remove("/var/run/netns/" + outsideNS)
}

func mustNL(t *testing.T, err error) {
	t.Helper()
	if err != nil && !errors.Is(err, os.ErrExist) {
		t.Fatal(err)
	}
}

func mustAddr(s string) *netlink.Addr {
	a, err := netlink.ParseAddr(s)
	if err != nil {
		panic(err)
	}
	return a
}

// newNamedNS creates a named namespace without moving the caller into it.
func newNamedNS(name string) (vnetns.NsHandle, error) {
	var h vnetns.NsHandle
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		goruntime.LockOSThread()
		orig, gerr := vnetns.Get()
		if gerr != nil {
			err = gerr
			return
		}
		defer orig.Close()
		h, err = vnetns.NewNamed(name)
		if serr := vnetns.Set(orig); serr == nil {
			goruntime.UnlockOSThread()
		}
	}()
	<-done
	return h, err
}

// inNS runs f on a thread inside ns.
func inNS(t *testing.T, ns vnetns.NsHandle, f func()) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		goruntime.LockOSThread()
		orig, err := vnetns.Get()
		if err == nil {
			defer orig.Close()
			err = vnetns.Set(ns)
		}
		if err != nil {
			done <- err
			return
		}
		f()
		if err := vnetns.Set(orig); err == nil {
			goruntime.UnlockOSThread()
		}
		done <- nil
	}()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
