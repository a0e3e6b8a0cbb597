package netns

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"

	"github.com/forkbox/forkbox/internal/errdefs"
)

// testConfig keeps the test away from a daemon's networks on this host.
func testConfig(t *testing.T) Config {
	return Config{
		Subnet:     netip.MustParsePrefix("10.202.0.0/16"),
		NamePrefix: "fbt-",
		LinkPrefix: "fbt",
		Table:      "forkbox_test",
		ResolvConf: "/nonexistent",
	}
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// newTestManager returns a manager whose networks and table are removed when
// the test ends, whatever happens. Networks an earlier run left (one killed
// before its cleanup) go first: New adopts what it finds under the test's
// prefix, as after a daemon restart, and the test's own names would then
// already exist.
func newTestManager(t *testing.T) *Manager {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatalf("netns tests need root")
	}
	stale, err := New(context.Background(), testConfig(t))
	if err != nil {
		t.Fatalf("New (clearing an earlier run's networks): %v", err)
	}
	if err := stale.Close(context.Background()); err != nil {
		t.Fatalf("clear an earlier run's networks: %v", err)
	}
	m, err := New(context.Background(), testConfig(t))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		if err := m.Close(context.Background()); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return m
}

// inNS runs f on a thread inside the namespace at path.
func inNS(t *testing.T, path string, f func()) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := vnetns.Get()
		if err != nil {
			done <- err
			return
		}
		ns, err := vnetns.GetFromPath(path)
		if err != nil {
			done <- err
			return
		}
		defer ns.Close()
		if err := vnetns.Set(ns); err != nil {
			done <- err
			return
		}
		f()
		if err := vnetns.Set(orig); err != nil {
			done <- err // thread stays locked and dies
			return
		}
		runtime.UnlockOSThread()
		done <- nil
	}()
	if err := <-done; err != nil {
		t.Fatalf("in namespace %s: %v", path, err)
	}
}

// listen opens a TCP listener inside a namespace that answers "ok".
func listen(t *testing.T, nsPath string) net.Listener {
	t.Helper()
	var ln net.Listener
	var err error
	inNS(t, nsPath, func() { ln, err = net.Listen("tcp4", "0.0.0.0:0") })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("ok"))
			c.Close()
		}
	}()
	return ln
}

// reach reports whether a TCP connect to addr succeeds (from inside nsPath
// if set) and reads "ok".
func reach(t *testing.T, nsPath, addr string) bool {
	t.Helper()
	var c net.Conn
	var err error
	dial := func() { c, err = net.DialTimeout("tcp4", addr, 700*time.Millisecond) }
	if nsPath == "" {
		dial()
	} else {
		inNS(t, nsPath, dial)
	}
	if err != nil {
		return false
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Second))
	b := make([]byte, 2)
	_, err = c.Read(b)
	return err == nil && string(b) == "ok"
}

func TestAllocateIsolateRecover(t *testing.T) {
	m := newTestManager(t)
	a, b, portA := allocateAndCheck(t, m)
	checkReconfigure(t, m, a, portA)
	checkRestart(t, a, b)
}

// allocateAndCheck allocates two networks (a with internet, b without) and
// checks who reaches whom; it returns both and the port a listens on.
func allocateAndCheck(t *testing.T, m *Manager) (Lease, Lease, int) {
	t.Helper()
	ctx := context.Background()
	a, err := m.Allocate(ctx, "aaaa", true)
	if err != nil {
		t.Fatalf("Allocate a: %v", err)
	}
	b, err := m.Allocate(ctx, "bbbb", false)
	if err != nil {
		t.Fatalf("Allocate b: %v", err)
	}
	if _, err := m.Allocate(ctx, "aaaa", true); !errors.Is(err, errdefs.ErrAlreadyExists) {
		t.Fatalf("duplicate Allocate: %v", err)
	}
	lnA, lnB := listen(t, a.NSPath), listen(t, b.NSPath)
	portA := lnA.Addr().(*net.TCPAddr).Port
	portB := lnB.Addr().(*net.TCPAddr).Port
	hostLn, err := net.Listen("tcp4", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	defer hostLn.Close()
	go func() {
		for {
			c, err := hostLn.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("ok"))
			c.Close()
		}
	}()
	hostPort := hostLn.Addr().(*net.TCPAddr).Port

	checks := []struct {
		name string
		from string
		to   string
		want bool
	}{
		{"host to a", "", fmt.Sprintf("%s:%d", a.Addr, portA), true},
		{"host to b", "", fmt.Sprintf("%s:%d", b.Addr, portB), true},
		{"a to b", a.NSPath, fmt.Sprintf("%s:%d", b.Addr, portB), false},
		{"b to a", b.NSPath, fmt.Sprintf("%s:%d", a.Addr, portA), false},
		{"a to host side", a.NSPath, fmt.Sprintf("%s:%d", a.HostAddr, hostPort), false},
		{"a to b's host side", a.NSPath, fmt.Sprintf("%s:%d", b.HostAddr, hostPort), false},
	}
	for _, c := range checks {
		if got := reach(t, c.from, c.to); got != c.want {
			t.Errorf("%s (%s): reachable = %v, want %v", c.name, c.to, got, c.want)
		}
	}
	return a, b, portA
}

// checkReconfigure strips a's address as runsc does (trap 5) and checks
// Reconfigure puts it back.
func checkReconfigure(t *testing.T, m *Manager, a Lease, portA int) {
	t.Helper()
	ctx := context.Background()
	inNS(t, a.NSPath, func() {
		link, _ := netlink.LinkByName("eth0")
		addrs, _ := netlink.AddrList(link, netlink.FAMILY_V4)
		for _, ad := range addrs {
			netlink.AddrDel(link, &ad)
		}
	})
	if err := m.Reconfigure(ctx, a.ID); err != nil {
		t.Fatalf("Reconfigure: %v", err)
	}
	if !reach(t, "", fmt.Sprintf("%s:%d", a.Addr, portA)) {
		t.Errorf("a unreachable after Reconfigure")
	}
}

// checkRestart checks a second manager (a daemon restart) adopts both
// networks and drops the unwanted one.
func checkRestart(t *testing.T, a, b Lease) {
	t.Helper()
	ctx := context.Background()
	m2, err := New(ctx, testConfig(t))
	if err != nil {
		t.Fatalf("New again: %v", err)
	}
	kept, err := m2.Recover(ctx, func(id string) bool { return id == "aaaa" })
	if err != nil {
		t.Fatalf("Recover: %v", err)
	}
	if len(kept) != 1 || !reflect.DeepEqual(kept[0], a) {
		t.Fatalf("Recover kept %+v, want [%+v]", kept, a)
	}
	if _, err := os.Stat(b.NSPath); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("b's namespace still exists: %v", err)
	}
	if !hasElement(t, m2, a.HostLink) {
		t.Errorf("a lost its policy chain across restart")
	}
	if _, err := m2.Allocate(ctx, "cccc", false); err != nil {
		t.Fatalf("Allocate after recover: %v", err)
	}
	if err := m2.Release(ctx, "aaaa"); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if err := m2.Release(ctx, "aaaa"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("second Release: %v", err)
	}
	if _, err := netlink.LinkByName(a.HostLink); err == nil {
		t.Errorf("%s still exists", a.HostLink)
	}
	if err := m2.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	assertNoLeftovers(t, m2.cfg)
}

// hasElement reports whether link is in the policy map.
func hasElement(t *testing.T, m *Manager, link string) bool {
	t.Helper()
	c, err := nftables.New()
	if err != nil {
		t.Fatal(err)
	}
	tbl := &nftables.Table{Name: m.cfg.Table, Family: nftables.TableFamilyINet}
	set, err := c.GetSetByName(tbl, policyMap)
	if err != nil {
		t.Fatal(err)
	}
	elems, err := c.GetSetElements(set)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range elems {
		if string(e.Key[:len(link)]) == link && (len(e.Key) == len(link) || e.Key[len(link)] == 0) {
			return true
		}
	}
	return false
}

// assertNoLeftovers checks the host holds nothing with cfg's prefixes.
func assertNoLeftovers(t *testing.T, cfg Config) {
	t.Helper()
	links, _ := netlink.LinkList()
	for _, l := range links {
		if len(l.Attrs().Name) > len(cfg.LinkPrefix) && l.Attrs().Name[:len(cfg.LinkPrefix)] == cfg.LinkPrefix {
			t.Errorf("leftover link %s", l.Attrs().Name)
		}
	}
	entries, _ := os.ReadDir(nsDir)
	for _, e := range entries {
		if len(e.Name()) > len(cfg.NamePrefix) && e.Name()[:len(cfg.NamePrefix)] == cfg.NamePrefix {
			t.Errorf("leftover namespace %s", e.Name())
		}
	}
	c, _ := nftables.New()
	if tbl, err := c.ListTableOfFamily(cfg.Table, nftables.TableFamilyINet); err == nil && tbl != nil {
		t.Errorf("leftover table %s", cfg.Table)
	}
}

// A link of the next slot that belongs to someone else (a second daemon
// with the same Config) is skipped, not taken over or deleted.
func TestAllocateSkipsForeignLink(t *testing.T) {
	ctx := context.Background()
	m := newTestManager(t)
	foreign := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "fbt1"}, PeerName: "zzfbtpeer"}
	if err := netlink.LinkAdd(foreign); err != nil {
		t.Fatal(err)
	}
	defer netlink.LinkDel(foreign)
	l, err := m.Allocate(ctx, "cccc", false)
	if err != nil {
		t.Fatalf("Allocate: %v", err)
	}
	if l.Slot != 2 {
		t.Fatalf("slot = %d, want 2 (1 is foreign)", l.Slot)
	}
	if _, err := netlink.LinkByName("fbt1"); err != nil {
		t.Fatalf("foreign link was removed: %v", err)
	}
}

// A sandbox's links carry no IPv6, on either side: a link with IPv6 on
// sends duplicate address detection, router solicitations and MLD reports
// in its first seconds, and one reaching runsc during a checkpoint can
// deadlock it (disableIPv6).
func TestNoIPv6OnSandboxLinks(t *testing.T) {
	if _, err := os.Stat("/proc/sys/net/ipv6"); err != nil {
		t.Fatalf("this host has no IPv6 to turn off, so the test cannot check it: %v", err)
	}
	m := newTestManager(t)
	l, err := m.Allocate(context.Background(), "ipv6", false)
	if err != nil {
		t.Fatal(err)
	}
	read := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %v: %s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	if got := read("cat", "/proc/sys/net/ipv6/conf/"+l.HostLink+"/disable_ipv6"); got != "1" {
		t.Errorf("host side %s: disable_ipv6 = %s, want 1", l.HostLink, got)
	}
	if got := read("ip", "netns", "exec", l.NSName, "cat", "/proc/sys/net/ipv6/conf/eth0/disable_ipv6"); got != "1" {
		t.Errorf("eth0 in %s: disable_ipv6 = %s, want 1", l.NSName, got)
	}
	if got := read("ip", "netns", "exec", l.NSName, "ip", "-6", "addr", "show", "dev", "eth0"); got != "" {
		t.Errorf("eth0 in %s has IPv6 addresses: %s", l.NSName, got)
	}
}
