package netns

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/forkbox/forkbox/internal/errdefs"
)

// sandboxLink is the name of the sandbox side of the veth pair.
const sandboxLink = "eth0"

// setup creates l on the host. The caller tears it down on failure.
func (m *Manager) setup(ctx context.Context, l Lease) error {
	nsh, err := newNamedNS(l.NSName)
	if err != nil {
		return fmt.Errorf("create namespace %s: %w", l.NSName, err)
	}
	defer nsh.Close()
	veth := &netlink.Veth{
		LinkAttrs:     netlink.LinkAttrs{Name: l.HostLink},
		PeerName:      sandboxLink,
		PeerNamespace: netlink.NsFd(int(nsh)),
	}
	if err := netlink.LinkAdd(veth); errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("add veth %s: %w", l.HostLink, errSlotBusy)
	} else if err != nil {
		return fmt.Errorf("add veth %s: %w", l.HostLink, err)
	}
	host, err := netlink.LinkByName(l.HostLink)
	if err != nil {
		return fmt.Errorf("find %s: %w", l.HostLink, err)
	}
	if err := disableIPv6(l.HostLink); err != nil {
		return err
	}
	if err := netlink.LinkSetAlias(host, alias(l)); err != nil {
		return fmt.Errorf("alias %s: %w", l.HostLink, err)
	}
	if err := netlink.AddrReplace(host, &netlink.Addr{IPNet: ipNet(l.HostAddr, l.Bits)}); err != nil {
		return fmt.Errorf("address %s: %w", l.HostLink, err)
	}
	if err := netlink.LinkSetUp(host); err != nil {
		return fmt.Errorf("up %s: %w", l.HostLink, err)
	}
	if err := configureInside(nsh, l); err != nil {
		return err
	}
	if err := waitUp(ctx, l.HostLink); err != nil {
		return err
	}
	if err := m.savePolicy(l); err != nil {
		return err
	}
	return m.applyPolicy(l)
}

// Reconfigure gives id's eth0 its address and default route again. runsc
// takes them over at start and drops them from the namespace when the
// sandbox is deleted, so restoring into the same namespace needs them back.
func (m *Manager) Reconfigure(ctx context.Context, id string) error {
	l, ok := m.Get(id)
	if !ok {
		return fmt.Errorf("network of %s: %w", id, errdefs.ErrNotFound)
	}
	nsh, err := vnetns.GetFromPath(l.NSPath)
	if err != nil {
		return fmt.Errorf("open namespace %s: %w", l.NSPath, err)
	}
	defer nsh.Close()
	return configureInside(nsh, l)
}

// configureInside sets eth0's address, brings eth0 and lo up and routes
// everything through the host side. Every step is idempotent.
func configureInside(nsh vnetns.NsHandle, l Lease) error {
	h, err := netlink.NewHandleAt(nsh)
	if err != nil {
		return fmt.Errorf("netlink in %s: %w", l.NSName, err)
	}
	defer h.Close()
	eth, err := h.LinkByName(sandboxLink)
	if err != nil {
		return fmt.Errorf("find eth0 in %s: %w", l.NSName, err)
	}
	if err := h.AddrReplace(eth, &netlink.Addr{IPNet: ipNet(l.Addr, l.Bits)}); err != nil {
		return fmt.Errorf("address eth0 in %s: %w", l.NSName, err)
	}
	for _, name := range []string{sandboxLink, "lo"} {
		link, err := h.LinkByName(name)
		if err == nil {
			err = h.LinkSetUp(link)
		}
		if err != nil {
			return fmt.Errorf("up %s in %s: %w", name, l.NSName, err)
		}
	}
	route := &netlink.Route{LinkIndex: eth.Attrs().Index, Gw: net.IP(l.HostAddr.AsSlice())}
	if err := h.RouteReplace(route); err != nil {
		return fmt.Errorf("default route in %s: %w", l.NSName, err)
	}
	return nil
}

// waitUp waits until the kernel reports link operationally up: the carrier
// of a fresh veth pair comes up asynchronously, and packets sent before are
// lost, which would cost the first connection a SYN retransmit (1 s).
func waitUp(ctx context.Context, name string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	for {
		link, err := netlink.LinkByName(name)
		if err != nil {
			return fmt.Errorf("find %s: %w", name, err)
		}
		if link.Attrs().OperState == netlink.OperUp {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not up (%s): %w", name, link.Attrs().OperState, errdefs.ErrUnavailable)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// teardown removes whatever exists of l; missing pieces are not errors.
func (m *Manager) teardown(l Lease) error {
	var errs []error
	if link, err := netlink.LinkByName(l.HostLink); err == nil {
		if err := netlink.LinkDel(link); err != nil {
			errs = append(errs, fmt.Errorf("delete %s: %w", l.HostLink, err))
		}
	}
	if err := m.removePolicy(l); err != nil {
		errs = append(errs, err)
	}
	if err := removeNS(l.NSPath); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// removeNS unmounts and removes a namespace bind mount if it exists.
func removeNS(path string) error {
	if _, err := os.Lstat(path); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	_ = vnetns.DeleteNamed(filepath.Base(path)) // unmounts; fails if not mounted
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove namespace %s: %w", path, err)
	}
	return nil
}

// scan finds the sandbox networks on the host, removing broken ones (a veth
// without a valid alias or namespace, a namespace without a veth).
func (m *Manager) scan() ([]Lease, error) {
	links, err := netlink.LinkList()
	if err != nil {
		return nil, fmt.Errorf("list links: %w", err)
	}
	var found []Lease
	ids := make(map[string]bool)
	for _, link := range links {
		name := link.Attrs().Name
		slot, ok := m.slotOf(name)
		if !ok {
			continue
		}
		l, ok := m.parseAlias(link.Attrs().Alias, slot)
		if ok && !ids[l.ID] {
			if _, err := os.Stat(l.NSPath); err == nil {
				ids[l.ID] = true
				found = append(found, l)
				continue
			}
		}
		m.log.Info("removing broken sandbox link", "link", name, "alias", link.Attrs().Alias)
		if err := netlink.LinkDel(link); err != nil {
			return nil, fmt.Errorf("delete %s: %w", name, err)
		}
	}
	return found, m.removeOrphanNS(ids)
}

// removeOrphanNS removes our namespaces whose id has no veth.
func (m *Manager) removeOrphanNS(ids map[string]bool) error {
	entries, err := os.ReadDir(nsDir)
	if err != nil {
		return fmt.Errorf("read %s: %w", nsDir, err)
	}
	for _, e := range entries {
		id, ok := strings.CutPrefix(e.Name(), m.cfg.NamePrefix)
		if !ok || ids[id] {
			continue
		}
		m.log.Info("removing orphan sandbox namespace", "name", e.Name())
		if err := removeNS(filepath.Join(nsDir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// slotOf parses a host-side link name.
func (m *Manager) slotOf(name string) (int, bool) {
	digits, ok := strings.CutPrefix(name, m.cfg.LinkPrefix)
	if !ok {
		return 0, false
	}
	slot, err := strconv.Atoi(digits)
	if err != nil || slot < 1 || slot > MaxSlots || strconv.Itoa(slot) != digits {
		return 0, false
	}
	return slot, true
}

// alias is what the host-side link records about its sandbox.
func alias(l Lease) string {
	if l.AllowInternet {
		return l.ID + ":inet"
	}
	return l.ID + ":noinet"
}

// parseAlias is the inverse of alias.
func (m *Manager) parseAlias(a string, slot int) (Lease, bool) {
	id, mode, ok := strings.Cut(a, ":")
	if !ok || id == "" || (mode != "inet" && mode != "noinet") {
		return Lease{}, false
	}
	return m.lease(id, slot, mode == "inet"), true
}

// newNamedNS creates and bind-mounts a namespace from a dedicated OS thread
// so no other goroutine ever runs inside it.
func newNamedNS(name string) (vnetns.NsHandle, error) {
	type result struct {
		h   vnetns.NsHandle
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := vnetns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{vnetns.None(), err}
			return
		}
		defer orig.Close()
		h, err := vnetns.NewNamed(name)
		if err == nil {
			err = disableIPv6("all", "default") // this thread is in the new namespace
		}
		if serr := vnetns.Set(orig); serr != nil {
			// The thread stays locked and exits with the goroutine: it
			// is in the wrong namespace.
			ch <- result{h, errors.Join(err, serr)}
			return
		}
		runtime.UnlockOSThread()
		ch <- result{h, err}
	}()
	r := <-ch
	if r.err != nil && r.h.IsOpen() {
		r.h.Close()
	}
	return r.h, r.err
}

// disableIPv6 turns IPv6 off on the calling thread's network namespace's
// interfaces named (or "all", "default"), before they come up. Sandboxes
// speak IPv4 only, and a link with IPv6 on sends duplicate address
// detection, router solicitations and MLD reports in its first seconds:
// one such packet reaching runsc while it saves the network stack
// deadlocks the checkpoint (gVisor's Stack.beforeSave waits for the packet
// dispatcher under the stack's lock, which the dispatcher needs to deliver
// the packet; the sentry's stacks of a CI run that hung showed exactly
// that). A kernel without IPv6 has nothing to turn off.
func disableIPv6(names ...string) error {
	for _, n := range names {
		p := filepath.Join("/proc/sys/net/ipv6/conf", n, "disable_ipv6")
		if err := os.WriteFile(p, []byte("1\n"), 0o644); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("turn IPv6 off on %s: %w", n, err)
		}
	}
	return nil
}

// ipNet converts an address and prefix length to the netlink form.
func ipNet(a netip.Addr, bits int) *net.IPNet {
	return &net.IPNet{IP: net.IP(a.AsSlice()), Mask: net.CIDRMask(bits, 32)}
}

// readResolvers returns the IPv4 nameservers of a resolv.conf file; a
// missing file means none.
func readResolvers(path string) []netip.Addr {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []netip.Addr
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 || fields[0] != "nameserver" {
			continue
		}
		if a, err := netip.ParseAddr(fields[1]); err == nil && a.Is4() {
			out = append(out, a)
		}
	}
	return out
}
