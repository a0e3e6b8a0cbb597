package netns

import (
	"fmt"
	"net/netip"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// installTable replaces the table atomically (add, delete, add in one
// batch) so setup is idempotent and never leaves a window without rules.
// leases are the adopted sandboxes whose policies must survive; each gets
// its objects in a transaction of its own after the table's (one batch for
// all overflows the netlink socket's buffer with acks once a few dozen
// sandboxes run). Until then the forward chain drops a lease's new
// connections: the gap fails closed.
func (m *Manager) installTable(leases []Lease) error {
	if err := m.installBase(); err != nil {
		return err
	}
	for _, l := range leases {
		if err := m.applyPolicy(l); err != nil {
			return err
		}
	}
	return nil
}

// installBase replaces the table with its base chains, maps and guard.
func (m *Manager) installBase() error {
	c, err := nftables.New()
	if err != nil {
		return fmt.Errorf("nftables: %w", err)
	}
	t := m.table()
	c.AddTable(t)
	c.DelTable(t)
	c.AddTable(t)
	if err := addMaps(c, t); err != nil {
		return err
	}
	if err := m.addGuardChain(c, t); err != nil {
		return err
	}
	m.addInputChain(c, t)
	m.addForwardChain(c, t)
	m.addNATChain(c, t)
	m.addRedirectChain(c, t)
	if err := c.Flush(); err != nil {
		return fmt.Errorf("install nftables table %s: %w", m.cfg.Table, err)
	}
	return nil
}

// addInputChain: the host accepts nothing from sandboxes but replies.
func (m *Manager) addInputChain(c *nftables.Conn, t *nftables.Table) {
	ch := c.AddChain(&nftables.Chain{Name: "input", Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookInput, Priority: nftables.ChainPriorityFilter})
	in := m.fromSandbox()
	c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: cat(in, ctReply(), accept())})
	if p := m.cfg.EgressPort; p != 0 {
		// Only connections the NAT chain redirected reach the proxy.
		c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: cat(in, dport(unix.IPPROTO_TCP, p), ctDNAT(), accept())})
	}
	c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: cat(in, drop())})
	if p := m.cfg.EgressPort; p != 0 {
		// The proxy listens on every address; nothing else may reach it
		// from outside the host. Loopback is left alone: the host's own
		// processes are trusted, and a table outliving its daemon (kill -9,
		// until the next start replaces it) would otherwise black-hole
		// whichever local server is given the freed port next.
		c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: cat(
			ifnameCmp(expr.MetaKeyIIFNAME, expr.CmpOpNeq, string(ifname("lo"))), dport(unix.IPPROTO_TCP, p), drop())})
	}
}

// addForwardChain: replies pass; no sandbox-to-sandbox traffic, no IPv6;
// a new connection is judged by its sandbox's chain (see addPolicyRules),
// and a sandbox without one forwards nothing.
func (m *Manager) addForwardChain(c *nftables.Conn, t *nftables.Table) {
	ch := c.AddChain(&nftables.Chain{Name: "forward", Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookForward, Priority: nftables.ChainPriorityFilter})
	in := m.fromSandbox()
	add := func(e ...[]expr.Any) { c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: cat(e...)}) }
	add(in, ctReply(), accept())
	add(in, ifnameCmp(expr.MetaKeyOIFNAME, expr.CmpOpEq, m.cfg.LinkPrefix), drop())
	add(in, []expr.Any{
		&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 2},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 2, Data: []byte{unix.NFPROTO_IPV4}},
	}, drop())
	add(in, jumpByLink(policyMap))
	add(in, drop())
}

// addRedirectChain sends a sandbox's new connections through its NAT
// chain, which redirects ports 80 and 443 to the egress proxy when its
// policy names hosts.
func (m *Manager) addRedirectChain(c *nftables.Conn, t *nftables.Table) {
	ch := c.AddChain(&nftables.Chain{Name: "prerouting", Table: t, Type: nftables.ChainTypeNAT,
		Hooknum: nftables.ChainHookPrerouting, Priority: nftables.ChainPriorityNATDest})
	c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: cat(m.fromSandbox(), jumpByLink(natMap))})
}

// jumpByLink jumps to the chain the verdict map assigns to the input link
// (left in register 1 by fromSandbox); an unlisted link falls through.
func jumpByLink(mapName string) []expr.Any {
	return []expr.Any{&expr.Lookup{SourceRegister: 1, SetName: mapName, DestRegister: 0, IsDestRegSet: true}}
}

// addNATChain masquerades sandbox traffic leaving through any non-sandbox
// link (the uplink, whichever the route picks).
func (m *Manager) addNATChain(c *nftables.Conn, t *nftables.Table) {
	ch := c.AddChain(&nftables.Chain{Name: "postrouting", Table: t, Type: nftables.ChainTypeNAT,
		Hooknum: nftables.ChainHookPostrouting, Priority: nftables.ChainPriorityNATSource})
	c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: cat(
		[]expr.Any{
			&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.NFPROTO_IPV4}},
		},
		payloadIn(12, m.cfg.Subnet),
		ifnameCmp(expr.MetaKeyOIFNAME, expr.CmpOpNeq, m.cfg.LinkPrefix),
		[]expr.Any{&expr.Masq{}},
	)})
}

// deleteTable removes the table if it exists.
func (m *Manager) deleteTable() error {
	c, err := nftables.New()
	if err != nil {
		return fmt.Errorf("nftables: %w", err)
	}
	t := &nftables.Table{Name: m.cfg.Table, Family: nftables.TableFamilyINet}
	c.AddTable(t)
	c.DelTable(t)
	if err := c.Flush(); err != nil {
		return fmt.Errorf("delete nftables table %s: %w", m.cfg.Table, err)
	}
	return nil
}

// fromSandbox matches packets entering through a sandbox's host-side link
// and leaves the input interface name in register 1 (for set lookups).
func (m *Manager) fromSandbox() []expr.Any {
	return ifnameCmp(expr.MetaKeyIIFNAME, expr.CmpOpEq, m.cfg.LinkPrefix)
}

// ifnameCmp compares an interface name with a prefix: a cmp shorter than the
// register compares only its length, which is how nft spells "fbh*".
func ifnameCmp(key expr.MetaKey, op expr.CmpOp, prefix string) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: key, Register: 1},
		&expr.Cmp{Op: op, Register: 1, Data: []byte(prefix)},
	}
}

// ctReply matches established and related connections.
func ctReply() []expr.Any {
	return []expr.Any{
		&expr.Ct{Register: 2, Key: expr.CtKeySTATE},
		&expr.Bitwise{SourceRegister: 2, DestRegister: 2, Len: 4,
			Mask: binaryutil.NativeEndian.PutUint32(expr.CtStateBitESTABLISHED | expr.CtStateBitRELATED),
			Xor:  binaryutil.NativeEndian.PutUint32(0)},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 2, Data: []byte{0, 0, 0, 0}},
	}
}

// daddrIn matches IPv4 destinations inside p.
func daddrIn(p netip.Prefix) []expr.Any { return payloadIn(16, p) }

// payloadIn matches the IPv4 address at offset (12 source, 16 destination)
// against p.
func payloadIn(offset uint32, p netip.Prefix) []expr.Any {
	mask := make([]byte, 4)
	copy(mask, netipMask(p.Bits()))
	addr := p.Masked().Addr().As4()
	return []expr.Any{
		&expr.Payload{DestRegister: 2, Base: expr.PayloadBaseNetworkHeader, Offset: offset, Len: 4},
		&expr.Bitwise{SourceRegister: 2, DestRegister: 2, Len: 4, Mask: mask, Xor: []byte{0, 0, 0, 0}},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 2, Data: addr[:]},
	}
}

// l4proto matches a transport protocol.
func l4proto(proto byte) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 2},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 2, Data: []byte{proto}},
	}
}

// dport matches a transport protocol and destination port.
func dport(proto byte, port uint16) []expr.Any {
	return append(l4proto(proto),
		&expr.Payload{DestRegister: 2, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 2, Data: binaryutil.BigEndian.PutUint16(port)},
	)
}

func accept() []expr.Any { return []expr.Any{&expr.Verdict{Kind: expr.VerdictAccept}} }
func drop() []expr.Any   { return []expr.Any{&expr.Verdict{Kind: expr.VerdictDrop}} }

// cat joins expression lists into one rule.
func cat(parts ...[]expr.Any) []expr.Any {
	var out []expr.Any
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// ifname pads an interface name to the kernel's IFNAMSIZ set key.
func ifname(name string) []byte {
	b := make([]byte, unix.IFNAMSIZ)
	copy(b, name)
	return b
}

// netipMask returns the 4-byte mask of a prefix length.
func netipMask(bits int) []byte {
	m := make([]byte, 4)
	for i := 0; i < bits; i++ {
		m[i/8] |= 0x80 >> (i % 8)
	}
	return m
}
