package egress

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/forkbox/forkbox/internal/netpolicy"
)

// decision is where an allowed connection goes, or why it may not.
type decision struct {
	to     netip.AddrPort // valid when allowed
	name   string         // set for a name allowOut lists: a tunnel dials it by name
	why    string         // the rule that decided
	reason string         // a netpolicy.Reason* when denied
	deny   bool
}

// decide applies the policy to a connection that asked for name (empty
// if none could be read) on its original destination. An allowed name is
// reached at its own address, never the one the sandbox dialled (through a
// tunnel: by name, the tunnel's end resolves it); so is a name with a
// transform, whose resolved address the address rules then judge, so that
// no header goes to an address the sandbox chose.
func (p *Proxy) decide(ctx context.Context, cn *conn, name string) decision {
	name = normalName(name)
	port := cn.dst.Port()
	if name != "" && cn.policy.AllowsName(name) {
		why := "allowOut name " + name
		if cn.policy.Tunnels() {
			return decision{name: name, to: netip.AddrPortFrom(netip.IPv4Unspecified(), port), why: why}
		}
		addr, err := p.resolve(ctx, name)
		if err != nil {
			return decision{deny: true, why: err.Error(), reason: netpolicy.ReasonResolve}
		}
		return decision{to: netip.AddrPortFrom(addr, port), why: why}
	}
	a := cn.dst.Addr()
	if _, _, ok := cn.policy.TransformFor(name); ok {
		addr, err := p.resolve(ctx, name)
		if err != nil {
			return decision{deny: true, why: err.Error(), reason: netpolicy.ReasonResolve}
		}
		a = addr
	}
	return p.decideAddr(cn, netip.AddrPortFrom(a, port), name)
}

// decideAddr applies the address rules to a connection to dst.
func (p *Proxy) decideAddr(cn *conn, dst netip.AddrPort, name string) decision {
	a := dst.Addr()
	if p.local.contains(a) {
		return decision{deny: true, why: "the host's own address", reason: netpolicy.ReasonHost}
	}
	if p.cfg.Sandboxes.IsValid() && p.cfg.Sandboxes.Contains(a) {
		return decision{deny: true, why: "another sandbox " + a.String(), reason: netpolicy.ReasonForbidden}
	}
	if !cn.policy.AllowsAddr(a, p.cfg.Opened) {
		if name != "" && cn.policy.HasNames() {
			return decision{deny: true, reason: netpolicy.ReasonName,
				why: fmt.Sprintf("name %s not in allowOut and %s denied", name, a)}
		}
		reason, rule := cn.policy.DenyRule(a, p.cfg.Opened)
		if reason == "" {
			reason, rule = netpolicy.ReasonForbidden, "not IPv4"
		}
		return decision{deny: true, why: "address " + a.String() + " denied: " + rule, reason: reason}
	}
	return decision{to: dst, why: "address rules"}
}

// resolve looks name up and returns its first IPv4 address that no rule
// forbids; a name with only forbidden addresses is refused, whatever the
// sandbox's own resolver said.
func (p *Proxy) resolve(ctx context.Context, name string) (netip.Addr, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	addrs, err := p.cfg.Resolver.LookupNetIP(ctx, "ip4", name)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("resolve %s: %v", name, err)
	}
	for _, a := range addrs {
		if p.reachable(a) {
			return a.Unmap(), nil
		}
	}
	return netip.Addr{}, fmt.Errorf("%s resolves only to forbidden addresses %v", name, addrs)
}

// reachable reports whether the host may connect to a on a sandbox's
// behalf at all: not forbidden, not the host, not a sandbox.
func (p *Proxy) reachable(a netip.Addr) bool {
	a = a.Unmap()
	return a.Is4() && !netpolicy.IsForbidden(a, p.cfg.Opened) && !p.local.contains(a) &&
		!(p.cfg.Sandboxes.IsValid() && p.cfg.Sandboxes.Contains(a))
}

// dialFor connects to an allowed destination: through the sandbox's
// tunnel when it has one (failing closed: never directly), else straight.
func (p *Proxy) dialFor(ctx context.Context, cn *conn, d decision) (net.Conn, error) {
	if up := cn.policy.Proxy; up != nil {
		target := d.to.String()
		if d.name != "" {
			target = net.JoinHostPort(d.name, strconv.Itoa(int(d.to.Port())))
		}
		return p.dialTunnel(ctx, up, target)
	}
	return p.dial(ctx, d.to)
}

// dial connects to the decided destination. The connection is tracked
// like the sandbox's, so Close cuts relays blocked on either side.
func (p *Proxy) dial(ctx context.Context, to netip.AddrPort) (net.Conn, error) {
	d := net.Dialer{Timeout: p.cfg.DialTimeout}
	c, err := d.DialContext(ctx, "tcp4", to.String())
	if err != nil {
		return nil, err
	}
	if !p.track(c) {
		c.Close()
		return nil, net.ErrClosed
	}
	return trackedConn{Conn: c, p: p}, nil
}

// trackedConn leaves the proxy's set when closed.
type trackedConn struct {
	net.Conn
	p *Proxy
}

func (c trackedConn) Close() error {
	c.p.untrack(c.Conn)
	return nil
}

// CloseWrite half-closes the upstream side.
func (c trackedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// normalName strips a port and trailing dot and lower-cases; an IP
// literal is no name.
func normalName(h string) string {
	if host, port, err := net.SplitHostPort(h); err == nil {
		if _, perr := strconv.Atoi(port); perr == nil {
			h = host
		}
	}
	h = strings.ToLower(strings.TrimSuffix(h, "."))
	if _, err := netip.ParseAddr(strings.Trim(h, "[]")); err == nil {
		return ""
	}
	return h
}

// localAddrs caches the host's own addresses: the proxy runs on the host,
// so a connection it makes to one of them would reach the host itself.
type localAddrs struct {
	mu    sync.Mutex
	at    time.Time
	addrs map[netip.Addr]bool
}

func (l *localAddrs) contains(a netip.Addr) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if time.Since(l.at) > 5*time.Second {
		l.addrs = map[netip.Addr]bool{}
		ifaddrs, _ := net.InterfaceAddrs()
		for _, ia := range ifaddrs {
			if pfx, err := netip.ParsePrefix(ia.String()); err == nil {
				l.addrs[pfx.Addr().Unmap()] = true
			}
		}
		l.at = time.Now()
	}
	return l.addrs[a.Unmap()]
}

// denialLog lets one denial log line per sandbox address through per
// second, so a sandbox hammering a denied host cannot flood the log.
type denialLog struct {
	mu   sync.Mutex
	last map[netip.Addr]time.Time
}

func newDenialLog() *denialLog { return &denialLog{last: map[netip.Addr]time.Time{}} }

func (d *denialLog) allow(src netip.Addr) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := time.Now()
	if now.Sub(d.last[src]) < time.Second {
		return false
	}
	if len(d.last) > 4096 {
		clear(d.last)
	}
	d.last[src] = now
	return true
}
