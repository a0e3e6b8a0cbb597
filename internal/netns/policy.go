package netns

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"go4.org/netipx"
	"golang.org/x/sys/unix"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/netpolicy"
)

// Every sandbox has its own objects in the table, named by slot: the
// interval sets a<N> (allowed) and d<N> (denied) of IPv4 ranges, the
// filter chain sb<N> that judges its new forwarded connections, and the
// NAT chain nat<N> that redirects its ports 80 and 443 to the egress proxy
// when its policy names hosts or sets headers, and all its outbound TCP
// but DNS when its traffic is tunnelled. The verdict maps below jump from
// the base chains to a sandbox's chains by the host-side link a packet
// enters on.
const (
	policyMap = "policy" // iifname → jump sb<N>
	natMap    = "natpolicy"
	guard     = "guard"  // the destinations no policy opens
	openedSet = "opened" // the operator's exceptions to guard
)

func allowSetName(slot int) string { return fmt.Sprintf("a%d", slot) }
func denySetName(slot int) string  { return fmt.Sprintf("d%d", slot) }
func chainName(slot int) string    { return fmt.Sprintf("sb%d", slot) }
func natChainName(slot int) string { return fmt.Sprintf("nat%d", slot) }

// SetPolicy replaces the egress policy of id's network in one nftables
// transaction: packets see the old rules or the new, never a mix, and
// established connections are not touched (the base chain accepts them
// before any policy). A policy naming hosts, setting headers or tunnelling
// needs Config.EgressPort.
func (m *Manager) SetPolicy(ctx context.Context, id string, p netpolicy.Policy) error {
	if (p.Proxied() || p.Tunnels()) && m.cfg.EgressPort == 0 {
		return fmt.Errorf("host names in allowOut, rules and egressProxy need the egress proxy, which is off: %w", errdefs.ErrInvalidArgument)
	}
	m.mu.Lock()
	l, ok := m.leases[id]
	m.mu.Unlock()
	if !ok {
		return fmt.Errorf("network of %s: %w", id, errdefs.ErrNotFound)
	}
	old := l.Policy
	l.Policy = p
	if err := m.savePolicy(l); err != nil {
		return err
	}
	if err := m.applyPolicy(l); err != nil {
		l.Policy = old
		if serr := m.savePolicy(l); serr != nil {
			m.log.WarnContext(ctx, "restore saved network policy", "id", id, "err", serr)
		}
		return err
	}
	m.mu.Lock()
	if cur, ok := m.leases[id]; ok && cur.Slot == l.Slot {
		m.leases[id] = l
	}
	m.mu.Unlock()
	return nil
}

// LeaseByAddr returns the lease whose sandbox address is a: the egress
// proxy finds the policy of a connection by its source.
func (m *Manager) LeaseByAddr(a netip.Addr) (Lease, bool) {
	a = a.Unmap()
	if !m.cfg.Subnet.Contains(a) {
		return Lease{}, false
	}
	slot := slotOfAddr(a)
	m.mu.Lock()
	defer m.mu.Unlock()
	id, ok := m.pool.used[slot]
	if !ok {
		return Lease{}, false
	}
	l, ok := m.leases[id]
	if !ok || l.Addr != a {
		return Lease{}, false
	}
	return l, true
}

// Subnet is the range the sandboxes' addresses come from.
func (m *Manager) Subnet() netip.Prefix { return m.cfg.Subnet }

// Opened is the operator's list of Forbidden ranges sandboxes may reach.
func (m *Manager) Opened() []netip.Prefix { return m.cfg.Opened }

// applyPolicy writes l's sets and chains in one transaction.
func (m *Manager) applyPolicy(l Lease) error {
	c, err := nftables.New()
	if err != nil {
		return fmt.Errorf("nftables: %w", err)
	}
	t := m.table()
	if err := m.addLeaseObjects(c, t, l); err != nil {
		return err
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("nftables policy of %s: %w", l.ID, err)
	}
	return nil
}

// addLeaseObjects queues (re)creating l's sets, chains and map elements:
// existing objects are flushed and refilled inside the same batch.
func (m *Manager) addLeaseObjects(c *nftables.Conn, t *nftables.Table, l Lease) error {
	sets := map[string][]netip.Prefix{allowSetName(l.Slot): l.Policy.Allow, denySetName(l.Slot): l.Policy.Deny}
	for name, pfxs := range sets {
		s := &nftables.Set{Table: t, Name: name, KeyType: nftables.TypeIPAddr, Interval: true}
		if err := c.AddSet(s, nil); err != nil {
			return fmt.Errorf("nftables set %s: %w", name, err)
		}
		c.FlushSet(s)
		if elems := rangeElements(pfxs); len(elems) > 0 {
			if err := c.SetAddElements(s, elems); err != nil {
				return fmt.Errorf("nftables set %s: %w", name, err)
			}
		}
	}
	if err := m.addRefusalObjects(c, t, l); err != nil {
		return err
	}
	ch := c.AddChain(&nftables.Chain{Name: chainName(l.Slot), Table: t})
	c.FlushChain(ch)
	m.addPolicyRules(c, t, ch, l)
	nat := c.AddChain(&nftables.Chain{Name: natChainName(l.Slot), Table: t})
	c.FlushChain(nat)
	m.addRedirectRules(c, t, nat, l.Policy)
	for mapName, chain := range map[string]string{policyMap: ch.Name, natMap: nat.Name} {
		vm := &nftables.Set{Table: t, Name: mapName, KeyType: nftables.TypeIFName, DataType: nftables.TypeVerdict, IsMap: true}
		el := nftables.SetElement{Key: ifname(l.HostLink), VerdictData: &expr.Verdict{Kind: expr.VerdictJump, Chain: chain}}
		if err := c.SetAddElements(vm, []nftables.SetElement{el}); err != nil {
			return fmt.Errorf("nftables map %s: %w", mapName, err)
		}
	}
	return nil
}

// addRedirectRules fills chain nat<N>. A tunnelled sandbox's every new
// TCP connection but DNS to the resolver goes to the egress proxy, which
// applies the address rules itself (the forward chain never sees these
// connections); otherwise ports 80 and 443 do when names or headers need
// the proxy. UDP is never redirected: it follows the kernel's rules.
func (m *Manager) addRedirectRules(c *nftables.Conn, t *nftables.Table, nat *nftables.Chain, p netpolicy.Policy) {
	add := func(e ...[]expr.Any) { c.AddRule(&nftables.Rule{Table: t, Chain: nat, Exprs: cat(e...)}) }
	switch {
	case p.Tunnels():
		for _, r := range m.resolver {
			add(daddrIn(netip.PrefixFrom(r, 32)), dport(unix.IPPROTO_TCP, 53), accept())
		}
		add(l4proto(unix.IPPROTO_TCP), redirectTo(m.cfg.EgressPort))
	case p.Proxied():
		for _, port := range []uint16{80, 443} {
			add(dport(unix.IPPROTO_TCP, port), redirectTo(m.cfg.EgressPort))
		}
	}
}

// addPolicyRules fills chain sb<N>: the resolver when hosts are named,
// then the guard, then allow beats deny, then the default: out.
func (m *Manager) addPolicyRules(c *nftables.Conn, t *nftables.Table, ch *nftables.Chain, l Lease) {
	add := func(e ...[]expr.Any) { c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: cat(e...)}) }
	if l.Policy.HasNames() {
		for _, r := range m.resolver {
			for _, proto := range []byte{unix.IPPROTO_UDP, unix.IPPROTO_TCP} {
				add(daddrIn(netip.PrefixFrom(r, 32)), dport(proto, 53), accept())
			}
		}
	}
	add([]expr.Any{&expr.Verdict{Kind: expr.VerdictJump, Chain: guard}})
	add(daddrInSet(allowSetName(l.Slot)), accept())
	for _, e := range countAndSample(denyCounterName(l.Slot), denySampleName(l.Slot)) {
		add(daddrInSet(denySetName(l.Slot)), e)
	}
	add(accept())
}

// addGuardChain: the resolver's port 53 and the opened ranges pass on to
// the sandbox's own rules; every other Forbidden destination is dropped.
func (m *Manager) addGuardChain(c *nftables.Conn, t *nftables.Table) error {
	ch := c.AddChain(&nftables.Chain{Name: guard, Table: t})
	add := func(e ...[]expr.Any) { c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: cat(e...)}) }
	for _, r := range m.resolver {
		for _, proto := range []byte{unix.IPPROTO_UDP, unix.IPPROTO_TCP} {
			add(daddrIn(netip.PrefixFrom(r, 32)), dport(proto, 53), ret())
		}
	}
	if len(m.cfg.Opened) > 0 {
		s := &nftables.Set{Table: t, Name: openedSet, KeyType: nftables.TypeIPAddr, Interval: true}
		if err := c.AddSet(s, rangeElements(m.cfg.Opened)); err != nil {
			return fmt.Errorf("nftables set %s: %w", openedSet, err)
		}
		add(daddrInSet(openedSet), ret())
	}
	for _, p := range netpolicy.Forbidden {
		for _, e := range guardDrop(p) {
			add(e)
		}
	}
	return nil
}

// addMaps creates the two verdict maps, empty; leases add their elements.
func addMaps(c *nftables.Conn, t *nftables.Table) error {
	for _, name := range []string{policyMap, natMap, refuseMap} {
		vm := &nftables.Set{Table: t, Name: name, KeyType: nftables.TypeIFName, DataType: nftables.TypeVerdict, IsMap: true}
		if err := c.AddSet(vm, nil); err != nil {
			return fmt.Errorf("nftables map %s: %w", name, err)
		}
	}
	return nil
}

// removePolicy deletes l's map elements, chains and sets. Each step is its
// own transaction so a missing piece does not keep the others.
func (m *Manager) removePolicy(l Lease) error {
	t := m.table()
	var errs []error
	step := func(what string, f func(c *nftables.Conn) error) {
		c, err := nftables.New()
		if err == nil {
			err = f(c)
		}
		if err == nil {
			err = c.Flush()
		}
		if err != nil && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("nftables remove %s of %s: %w", what, l.ID, err))
		}
	}
	for _, mapName := range []string{policyMap, natMap} {
		step(mapName, func(c *nftables.Conn) error {
			vm := &nftables.Set{Table: t, Name: mapName, KeyType: nftables.TypeIFName, DataType: nftables.TypeVerdict, IsMap: true}
			return c.SetDeleteElements(vm, []nftables.SetElement{{Key: ifname(l.HostLink)}})
		})
	}
	for _, s := range removeRefusalSteps(t, l) {
		step(s.what, s.f)
	}
	for _, name := range []string{chainName(l.Slot), natChainName(l.Slot)} {
		step(name, func(c *nftables.Conn) error {
			ch := &nftables.Chain{Name: name, Table: t}
			c.FlushChain(ch)
			c.DelChain(ch)
			return nil
		})
	}
	for _, name := range []string{allowSetName(l.Slot), denySetName(l.Slot)} {
		step(name, func(c *nftables.Conn) error {
			c.DelSet(&nftables.Set{Table: t, Name: name})
			return nil
		})
	}
	for _, s := range removeRefusalData(t, l) {
		step(s.what, s.f)
	}
	if err := os.Remove(m.policyPath(l.ID)); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, fmt.Errorf("remove saved policy of %s: %w", l.ID, err))
	}
	return errors.Join(errs...)
}

func (m *Manager) table() *nftables.Table {
	return &nftables.Table{Name: m.cfg.Table, Family: nftables.TableFamilyINet}
}

// policyPath is where l's policy is kept so a restarted daemon (which
// rebuilds the table) enforces it again. It lives under /run: networks do
// not survive a reboot either.
func (m *Manager) policyPath(id string) string {
	return filepath.Join(m.cfg.StateDir, id+".json")
}

// savePolicy persists l's policy atomically.
func (m *Manager) savePolicy(l Lease) error {
	b, err := json.Marshal(l.Policy)
	if err != nil {
		return fmt.Errorf("encode policy of %s: %w", l.ID, err)
	}
	if err := os.MkdirAll(m.cfg.StateDir, 0o700); err != nil {
		return fmt.Errorf("policy dir: %w", err)
	}
	// Mode 0600 whatever a leftover file had: a policy holds the rules'
	// headers and the egress proxy's password.
	path := m.policyPath(l.ID)
	os.Remove(path + ".tmp")
	if err := os.WriteFile(path+".tmp", b, 0o600); err != nil {
		return fmt.Errorf("save policy of %s: %w", l.ID, err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		return fmt.Errorf("save policy of %s: %w", l.ID, err)
	}
	return nil
}

// loadPolicy fills l.Policy from its saved file; without one, the policy
// is the alias's internet on/off.
func (m *Manager) loadPolicy(l *Lease) {
	b, err := os.ReadFile(m.policyPath(l.ID))
	if err == nil {
		var p netpolicy.Policy
		if err = json.Unmarshal(b, &p); err == nil {
			l.Policy = p
			return
		}
	}
	if !errors.Is(err, os.ErrNotExist) {
		m.log.Warn("unreadable saved network policy; using internet on/off", "id", l.ID, "err", err)
	}
	l.Policy = basePolicy(l.AllowInternet)
}

// removeOrphanPolicies removes saved policies of ids without a network,
// and every half-written one (<id>.json.tmp: a daemon killed inside
// savePolicy, before its rename; the .json, if any, is the policy).
func (m *Manager) removeOrphanPolicies(ids map[string]bool) {
	entries, _ := os.ReadDir(m.cfg.StateDir)
	for _, e := range entries {
		id, ok := strings.CutSuffix(e.Name(), ".json")
		if (ok && !ids[id]) || strings.HasSuffix(e.Name(), ".json.tmp") {
			os.Remove(filepath.Join(m.cfg.StateDir, e.Name()))
		}
	}
}

// basePolicy is the policy of a sandbox with no rules: all out or nothing.
func basePolicy(allowInternet bool) netpolicy.Policy {
	_, p, _ := netpolicy.Compile(netpolicy.Rules{}, allowInternet, nil) // no entries: cannot fail
	return p
}

// rangeElements turns prefixes into interval-set elements: each merged
// range [from, to] is a start element and an end element at to+1 (none
// when to is the last address: the interval runs to the end).
func rangeElements(pfxs []netip.Prefix) []nftables.SetElement {
	var b netipx.IPSetBuilder
	for _, p := range pfxs {
		b.AddPrefix(p)
	}
	s, _ := b.IPSet()
	var out []nftables.SetElement
	for _, r := range s.Ranges() {
		from := r.From().As4()
		out = append(out, nftables.SetElement{Key: from[:]})
		if next := r.To().Next(); next.IsValid() && next.Is4() {
			to := next.As4()
			out = append(out, nftables.SetElement{Key: to[:], IntervalEnd: true})
		}
	}
	return out
}

// daddrInSet matches IPv4 destinations in the named set.
func daddrInSet(name string) []expr.Any {
	return []expr.Any{
		&expr.Payload{DestRegister: 2, Base: expr.PayloadBaseNetworkHeader, Offset: 16, Len: 4},
		&expr.Lookup{SourceRegister: 2, SetName: name},
	}
}

// redirectTo redirects to port on the address of the incoming link.
func redirectTo(port uint16) []expr.Any {
	return []expr.Any{
		&expr.Immediate{Register: 3, Data: binaryutil.BigEndian.PutUint16(port)},
		&expr.Redir{RegisterProtoMin: 3, Flags: unix.NF_NAT_RANGE_PROTO_SPECIFIED},
	}
}

// ctDNAT matches connections whose destination was rewritten (redirected).
func ctDNAT() []expr.Any {
	return []expr.Any{
		&expr.Ct{Register: 2, Key: expr.CtKeySTATUS},
		&expr.Bitwise{SourceRegister: 2, DestRegister: 2, Len: 4,
			Mask: binaryutil.NativeEndian.PutUint32(ipsDstNAT),
			Xor:  binaryutil.NativeEndian.PutUint32(0)},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 2, Data: []byte{0, 0, 0, 0}},
	}
}

// ipsDstNAT is conntrack's IPS_DST_NAT status bit (linux/netfilter/
// nf_conntrack_common.h), which x/sys/unix does not export.
const ipsDstNAT = 1 << 5

func ret() []expr.Any { return []expr.Any{&expr.Verdict{Kind: expr.VerdictReturn}} }
