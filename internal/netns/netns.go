// Package netns gives every sandbox its own Linux network namespace: a veth
// pair whose host side (the first address of a /30) routes and NATs for the
// sandbox side (eth0, the second), an address slot from a pool, and one nftables
// table that keeps sandboxes away from the host, from each other and from
// private networks.
//
// Addressing: a Manager owns one /16 (10.201.0.0/16 by default) and gives
// slot N (1..MaxSlots) the /30 at offset 4N: slot 1 is 10.201.0.4/30 (host
// 10.201.0.5, sandbox 10.201.0.6), slot 64 is 10.201.1.0/30.
//
// Host state is the source of truth so a restarted daemon can reattach: the
// host-side veth is named <LinkPrefix><N> and carries the alias
// "<id>:inet" or "<id>:noinet"; the namespace is /var/run/netns/<NamePrefix><id>.
package netns

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"sync"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/netpolicy"
)

// nsDir is where named network namespaces are bind-mounted (the iproute2
// convention, so `ip netns` sees them too).
const nsDir = "/var/run/netns"

// foreignOwner marks a pool slot whose link exists but belongs to no lease
// of this manager.
const foreignOwner = "\x00foreign"

// errSlotBusy reports that a slot's link name is taken on the host.
var errSlotBusy = errors.New("network slot busy")

// Config configures a Manager. The zero value of every field means the
// production default; tests set their own prefixes so they never touch a
// running daemon's namespaces.
type Config struct {
	// Subnet is the /16 sandboxes are numbered in. Default 10.201.0.0/16.
	Subnet netip.Prefix
	// NamePrefix starts every namespace name. Default "fbx-".
	NamePrefix string
	// LinkPrefix starts every host-side veth name; with the slot number it
	// must fit in 15 characters. Default "fbh".
	LinkPrefix string
	// Table is the nftables table (family inet). Default "forkbox".
	Table string
	// ResolvConf names the resolver file whose nameservers sandboxes may
	// reach despite the private-range rule. Default /etc/resolv.conf.
	ResolvConf string
	// StateDir keeps each sandbox's policy so a restarted daemon enforces
	// it again. Default /run/forkbox/<Table>.
	StateDir string
	// EgressPort is the local TCP port of the egress proxy that ports 80
	// and 443 of sandboxes whose policy names hosts are redirected to; 0
	// means no proxy (host names are then refused).
	EgressPort uint16
	// Opened are Forbidden ranges (netpolicy.Forbidden) the operator lets
	// sandboxes reach, subject to their policies.
	Opened []netip.Prefix
	// Logger receives diagnostics. Default slog.Default().
	Logger *slog.Logger
}

func (c *Config) setDefaults() error {
	if !c.Subnet.IsValid() {
		c.Subnet = netip.MustParsePrefix("10.201.0.0/16")
	}
	if c.Subnet.Bits() != 16 || !c.Subnet.Addr().Is4() {
		return fmt.Errorf("subnet %s is not an IPv4 /16: %w", c.Subnet, errdefs.ErrInvalidArgument)
	}
	c.Subnet = c.Subnet.Masked()
	if c.NamePrefix == "" {
		c.NamePrefix = "fbx-"
	}
	if c.LinkPrefix == "" {
		c.LinkPrefix = "fbh"
	}
	if len(c.LinkPrefix) > 12 {
		return fmt.Errorf("link prefix %q longer than 12: %w", c.LinkPrefix, errdefs.ErrInvalidArgument)
	}
	if c.Table == "" {
		c.Table = "forkbox"
	}
	if c.ResolvConf == "" {
		c.ResolvConf = "/etc/resolv.conf"
	}
	if c.StateDir == "" {
		c.StateDir = filepath.Join("/run/forkbox", c.Table)
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return nil
}

// Lease is one sandbox's network: its namespace and addresses.
type Lease struct {
	// ID is the sandbox id.
	ID string
	// Slot is the pool slot (its /30 is at offset 4·Slot of the /16).
	Slot int
	// NSName is the namespace name; NSPath its bind mount.
	NSName, NSPath string
	// HostLink is the host-side veth.
	HostLink string
	// HostAddr is the host side's address, the sandbox's gateway.
	HostAddr netip.Addr
	// Addr is the sandbox's eth0 address.
	Addr netip.Addr
	// Bits is the prefix length of both addresses.
	Bits int
	// AllowInternet is the internet on/off the network was allocated
	// with; Policy (which SetPolicy replaces) is what is enforced.
	AllowInternet bool
	// Policy is the egress policy in force.
	Policy netpolicy.Policy
}

// Manager allocates and releases sandbox networks. It is safe for
// concurrent use.
type Manager struct {
	cfg      Config
	log      *slog.Logger
	resolver []netip.Addr

	mu     sync.Mutex
	pool   *pool            // guarded by mu
	leases map[string]Lease // by sandbox id; guarded by mu
}

// New enables IPv4 forwarding, adopts every sandbox network that already
// exists on the host (see Recover to drop unwanted ones) and installs the
// nftables table, replacing an older copy atomically.
func New(ctx context.Context, cfg Config) (*Manager, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	m := &Manager{
		cfg:    cfg,
		log:    cfg.Logger,
		pool:   newPool(MaxSlots),
		leases: make(map[string]Lease),
	}
	m.resolver = readResolvers(cfg.ResolvConf)
	if err := os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1\n"), 0o644); err != nil {
		return nil, fmt.Errorf("enable ip_forward: %w", err)
	}
	if err := os.MkdirAll(nsDir, 0o755); err != nil {
		return nil, fmt.Errorf("create %s: %w", nsDir, err)
	}
	found, err := m.scan()
	if err != nil {
		return nil, err
	}
	ids := make(map[string]bool)
	for i := range found {
		m.loadPolicy(&found[i])
		ids[found[i].ID] = true
	}
	m.removeOrphanPolicies(ids)
	for _, l := range found {
		if err := m.pool.claim(l.Slot, l.ID); err != nil {
			return nil, fmt.Errorf("adopt %s: %w", l.HostLink, err)
		}
		m.leases[l.ID] = l
	}
	if err := m.installTable(found); err != nil {
		return nil, err
	}
	return m, nil
}

// Allocate creates the network of sandbox id: namespace, veth pair,
// addresses, default route and firewall membership. On failure nothing is
// left behind. A second Allocate for the same id fails with
// ErrAlreadyExists; a full pool with ErrResourceExhausted.
func (m *Manager) Allocate(ctx context.Context, id string, allowInternet bool) (Lease, error) {
	for attempt := 0; ; attempt++ {
		l, err := m.reserve(id, allowInternet)
		if err != nil {
			return Lease{}, err
		}
		err = m.setup(ctx, l)
		if err == nil {
			return l, nil
		}
		if errors.Is(err, errSlotBusy) && attempt < 8 {
			// Another process owns the link (a second daemon with the
			// same Config): leave its link alone, keep the slot marked
			// and try the next one.
			m.log.WarnContext(ctx, "network slot held outside this manager", "link", l.HostLink)
			if rerr := removeNS(l.NSPath); rerr != nil {
				m.log.WarnContext(ctx, "undo failed network setup", "id", id, "err", rerr)
			}
			m.mu.Lock()
			delete(m.leases, id)
			m.pool.used[l.Slot] = foreignOwner
			m.mu.Unlock()
			continue
		}
		if terr := m.teardown(l); terr != nil {
			m.log.WarnContext(ctx, "undo failed network setup", "id", id, "err", terr)
		}
		m.forget(l)
		return Lease{}, err
	}
}

// reserve takes a slot for id and records its lease.
func (m *Manager) reserve(id string, allowInternet bool) (Lease, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.leases[id]; ok {
		return Lease{}, fmt.Errorf("network of %s: %w", id, errdefs.ErrAlreadyExists)
	}
	slot, err := m.pool.get(id)
	if err != nil {
		return Lease{}, err
	}
	l := m.lease(id, slot, allowInternet)
	m.leases[id] = l // reserve the id while the host work runs
	return l, nil
}

// Get returns the lease of id.
func (m *Manager) Get(id string) (Lease, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	l, ok := m.leases[id]
	return l, ok
}

// Leases returns every lease, ordered by slot.
func (m *Manager) Leases() []Lease {
	m.mu.Lock()
	out := make([]Lease, 0, len(m.leases))
	for _, l := range m.leases {
		out = append(out, l)
	}
	m.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Slot < out[j].Slot })
	return out
}

// Release removes the namespace, veth pair and firewall membership of id and
// frees its slot. Unknown ids return ErrNotFound.
func (m *Manager) Release(ctx context.Context, id string) error {
	l, ok := m.Get(id)
	if !ok {
		return fmt.Errorf("network of %s: %w", id, errdefs.ErrNotFound)
	}
	err := m.teardown(l)
	m.forget(l)
	return err
}

// Recover drops every adopted network whose id keep rejects (a leftover of
// a sandbox the daemon no longer knows) and returns the kept leases.
func (m *Manager) Recover(ctx context.Context, keep func(id string) bool) ([]Lease, error) {
	var errs []error
	for _, l := range m.Leases() {
		if keep(l.ID) {
			continue
		}
		m.log.InfoContext(ctx, "removing leftover sandbox network", "id", l.ID, "link", l.HostLink)
		if err := m.Release(ctx, l.ID); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return m.Leases(), fmt.Errorf("recover networks: %v: %w", errs, errdefs.ErrInternal)
	}
	return m.Leases(), nil
}

// Close removes every network the manager holds and its nftables table.
// Only tests and uninstall call it: a daemon restart must keep sandboxes.
func (m *Manager) Close(ctx context.Context) error {
	if _, err := m.Recover(ctx, func(string) bool { return false }); err != nil {
		return err
	}
	return m.deleteTable()
}

// slotOfAddr is the slot whose /30 holds a (an address of the Manager's
// /16): the inverse of lease's addressing.
func slotOfAddr(a netip.Addr) int {
	b := a.As4()
	return (int(b[2])<<8 | int(b[3])) / 4
}

// lease computes the addresses of slot.
func (m *Manager) lease(id string, slot int, allowInternet bool) Lease {
	b := m.cfg.Subnet.Addr().As4()
	off := slot * 4
	b[2], b[3] = byte(off>>8), byte(off&0xff)+1
	host := netip.AddrFrom4(b)
	b[3]++
	name := m.cfg.NamePrefix + id
	return Lease{
		ID: id, Slot: slot, NSName: name, NSPath: filepath.Join(nsDir, name),
		HostLink: fmt.Sprintf("%s%d", m.cfg.LinkPrefix, slot),
		HostAddr: host, Addr: netip.AddrFrom4(b), Bits: 30,
		AllowInternet: allowInternet, Policy: basePolicy(allowInternet),
	}
}

// forget drops l from the pool.
func (m *Manager) forget(l Lease) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if cur, ok := m.leases[l.ID]; ok && cur.Slot == l.Slot {
		delete(m.leases, l.ID)
	}
	if m.pool.used[l.Slot] == l.ID {
		m.pool.put(l.Slot)
	}
}
