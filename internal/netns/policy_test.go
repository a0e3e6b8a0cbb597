package netns

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/forkbox/forkbox/internal/netpolicy"
)

// listenOutside opens a TCP listener on addr:port in the outside namespace
// that answers "ok".
func listenOutside(t *testing.T, ns, addr string, port int) {
	t.Helper()
	var ln net.Listener
	var err error
	inNS(t, ns, func() { ln, err = net.Listen("tcp4", fmt.Sprintf("%s:%d", addr, port)) })
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
}

func compile(t *testing.T, r netpolicy.Rules, internet bool) netpolicy.Policy {
	t.Helper()
	_, p, err := netpolicy.Compile(r, internet, nil)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestPolicyAddressRules applies E2B's address rules to one sandbox
// network, in place, and checks what it reaches in the outside namespace;
// the metadata address and the host stay unreachable under every rule set.
func TestPolicyAddressRules(t *testing.T) {
	ctx := context.Background()
	out := setupOutside(t)
	const port = 8080
	for _, a := range append(outAddrs, metadataIP) {
		listenOutside(t, out, a, port)
	}
	// The servers and the route work: the host reaches all of them, so an
	// unreachable one below is the policy's doing.
	for _, a := range append(outAddrs, metadataIP) {
		if !reach(t, "", fmt.Sprintf("%s:%d", a, port)) {
			t.Fatalf("host cannot reach outside server %s", a)
		}
	}
	m := newTestManager(t)
	l, err := m.Allocate(ctx, "pppp", true)
	if err != nil {
		t.Fatal(err)
	}
	hostLn, err := net.Listen("tcp4", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	defer hostLn.Close()
	hostPort := hostLn.Addr().(*net.TCPAddr).Port

	all0 := "0.0.0.0/0"
	tests := []struct {
		name     string
		rules    netpolicy.Rules
		internet bool
		want     [3]bool // reach .7 .8 .9
	}{
		{"no rules", netpolicy.Rules{}, true, [3]bool{true, true, true}},
		{"deny one address", netpolicy.Rules{DenyOut: []string{"198.51.100.7"}}, true, [3]bool{false, true, true}},
		{"deny a CIDR", netpolicy.Rules{DenyOut: []string{"198.51.100.0/29"}}, true, [3]bool{false, true, true}},
		{"allow alone restricts nothing", netpolicy.Rules{AllowOut: []string{"198.51.100.8"}}, true, [3]bool{true, true, true}},
		{"allow beats deny", netpolicy.Rules{AllowOut: []string{"198.51.100.8/31"}, DenyOut: []string{all0}}, true, [3]bool{false, true, true}},
		{"allow beats a narrower deny", netpolicy.Rules{AllowOut: []string{"198.51.100.0/24"}, DenyOut: []string{"198.51.100.7"}}, true, [3]bool{true, true, true}},
		{"no internet", netpolicy.Rules{}, false, [3]bool{false, false, false}},
		{"no internet but an allow", netpolicy.Rules{AllowOut: []string{"198.51.100.9"}}, false, [3]bool{false, false, true}},
		{"allow everything", netpolicy.Rules{AllowOut: []string{all0}}, false, [3]bool{true, true, true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := m.SetPolicy(ctx, l.ID, compile(t, tt.rules, tt.internet)); err != nil {
				t.Fatalf("SetPolicy: %v", err)
			}
			for i, a := range outAddrs {
				if got := reach(t, l.NSPath, fmt.Sprintf("%s:%d", a, port)); got != tt.want[i] {
					t.Errorf("reach %s = %v, want %v", a, got, tt.want[i])
				}
			}
			if reach(t, l.NSPath, fmt.Sprintf("%s:%d", metadataIP, port)) {
				t.Errorf("sandbox reaches the metadata address")
			}
			if reach(t, l.NSPath, fmt.Sprintf("%s:%d", l.HostAddr, hostPort)) {
				t.Errorf("sandbox reaches the host")
			}
		})
	}
}

// TestPolicyKeepsEstablished checks a tightened policy leaves an open
// allowed connection alone while refusing new ones, and that a restarted
// manager enforces the saved policy.
func TestPolicyKeepsEstablished(t *testing.T) {
	ctx := context.Background()
	out := setupOutside(t)
	var ln net.Listener
	var err error
	inNS(t, out, func() { ln, err = net.Listen("tcp4", outAddrs[0]+":8081") })
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { // echo
				defer c.Close()
				b := make([]byte, 64)
				for {
					n, err := c.Read(b)
					if err != nil {
						return
					}
					c.Write(b[:n])
				}
			}()
		}
	}()
	m := newTestManager(t)
	l, err := m.Allocate(ctx, "eeee", true)
	if err != nil {
		t.Fatal(err)
	}
	var c net.Conn
	inNS(t, l.NSPath, func() { c, err = net.DialTimeout("tcp4", outAddrs[0]+":8081", time.Second) })
	if err != nil {
		t.Fatalf("dial before the change: %v", err)
	}
	defer c.Close()
	deny := compile(t, netpolicy.Rules{DenyOut: []string{outAddrs[0]}}, true)
	if err := m.SetPolicy(ctx, l.ID, deny); err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte("ping")); err != nil {
		t.Fatalf("write on the established connection: %v", err)
	}
	b := make([]byte, 4)
	if _, err := c.Read(b); err != nil || string(b) != "ping" {
		t.Fatalf("established connection broke: %q, %v", b, err)
	}
	var c2 net.Conn
	inNS(t, l.NSPath, func() { c2, err = net.DialTimeout("tcp4", outAddrs[0]+":8081", 700*time.Millisecond) })
	if err == nil {
		c2.Close()
		t.Fatalf("new connection to a denied address succeeded")
	}
	m2, err := New(ctx, testConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	got, ok := m2.Get(l.ID)
	if !ok || len(got.Policy.Deny) != 1 || got.Policy.Deny[0] != netip.MustParsePrefix(outAddrs[0]+"/32") {
		t.Fatalf("restarted manager's policy = %+v, want the deny", got.Policy)
	}
	inNS(t, l.NSPath, func() { c2, err = net.DialTimeout("tcp4", outAddrs[0]+":8081", 700*time.Millisecond) })
	if err == nil {
		c2.Close()
		t.Fatalf("denied address reachable after a restart")
	}
}

// TestPolicyNoIPv6: sandbox links have IPv6 off (TestNoIPv6OnSandboxLinks),
// and should it be turned on, sandboxes have no IPv6 beyond their own link
// and the host's IPv6 address on that link answers nothing: the input
// chain (family inet) drops both families. The control: with the table
// removed the same connection works, so the refusal is the rules' doing.
func TestPolicyNoIPv6(t *testing.T) {
	ctx := context.Background()
	m := newTestManager(t)
	l, err := m.Allocate(ctx, "six6", true)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile("/proc/sys/net/ipv6/conf/"+l.HostLink+"/disable_ipv6", []byte("0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("ip", "netns", "exec", l.NSName, "sysctl", "-qw", "net.ipv6.conf.eth0.disable_ipv6=0").CombinedOutput(); err != nil {
		t.Fatalf("turn IPv6 on in %s: %v: %s", l.NSName, err, out)
	}
	hostLL := linkLocal(t, "", l.HostLink)
	linkLocal(t, l.NSPath, "eth0")
	hostLn, err := net.Listen("tcp6", "[::]:0")
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
	toHost := fmt.Sprintf("[%s%%eth0]:%d", hostLL, hostLn.Addr().(*net.TCPAddr).Port)
	if err := m.deleteTable(); err != nil {
		t.Fatal(err)
	}
	if !reach6(t, l.NSPath, toHost) {
		t.Fatalf("without the table the sandbox cannot reach %s either: test setup broken", toHost)
	}
	if err := m.installTable(m.Leases()); err != nil {
		t.Fatal(err)
	}
	if reach6(t, l.NSPath, toHost) {
		t.Errorf("sandbox reaches the host over IPv6 at %s", toHost)
	}
}

// linkLocal waits for the IPv6 link-local address of link (in nsPath, or
// the host's namespace if empty) to finish duplicate address detection.
func linkLocal(t *testing.T, nsPath, link string) netip.Addr {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		var found netip.Addr
		look := func() {
			lk, err := netlink.LinkByName(link)
			if err != nil {
				return
			}
			addrs, _ := netlink.AddrList(lk, netlink.FAMILY_V6)
			for _, a := range addrs {
				ip, _ := netip.AddrFromSlice(a.IP)
				if ip.IsLinkLocalUnicast() && a.Flags&unix.IFA_F_TENTATIVE == 0 {
					found = ip
				}
			}
		}
		if nsPath == "" {
			look()
		} else {
			inNS(t, nsPath, look)
		}
		if found.IsValid() {
			return found
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("no IPv6 link-local address on %s", link)
	return netip.Addr{}
}

func reach6(t *testing.T, nsPath, addr string) bool {
	t.Helper()
	var c net.Conn
	var err error
	dial := func() { c, err = net.DialTimeout("tcp6", addr, 700*time.Millisecond) }
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
