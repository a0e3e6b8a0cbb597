package egress

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"time"

	"golang.org/x/net/proxy"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/netpolicy"
)

// dialTunnel connects to target (address:port, or name:port for the
// proxy to resolve: SOCKS5 ATYP domain) through the sandbox's SOCKS5
// proxy. The proxy's own host is resolved now and the connection pinned to
// an address the host may reach, so a DNS answer pointing at the host, a
// sandbox or a private range is refused rather than followed. Every
// failure is the connection's: there is no direct fallback.
func (p *Proxy) dialTunnel(ctx context.Context, up *netpolicy.EgressProxy, target string) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.DialTimeout)
	defer cancel()
	at, err := pinProxy(ctx, p.cfg.Resolver, up.Address, p.reachable)
	if err != nil {
		return nil, err
	}
	var auth *proxy.Auth
	if up.Username != "" {
		auth = &proxy.Auth{User: up.Username, Password: up.Password}
	}
	d, err := proxy.SOCKS5("tcp", at.String(), auth, pinnedDialer{to: at})
	if err != nil {
		return nil, fmt.Errorf("socks5 %s: %w", up.Address, err)
	}
	c, err := d.(proxy.ContextDialer).DialContext(ctx, "tcp", target)
	if err != nil {
		return nil, fmt.Errorf("through socks5 %s to %s: %w", up.Address, target, err)
	}
	if !p.track(c) {
		c.Close()
		return nil, net.ErrClosed
	}
	return trackedConn{Conn: c, p: p}, nil
}

// pinProxy resolves the host of address (host:port) and returns the first
// of its IPv4 addresses ok accepts.
func pinProxy(ctx context.Context, res *net.Resolver, address string, ok func(netip.Addr) bool) (netip.AddrPort, error) {
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return netip.AddrPort{}, err
	}
	pn, err := net.LookupPort("tcp", port)
	if err != nil {
		return netip.AddrPort{}, err
	}
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{a}
	} else if addrs, err = res.LookupNetIP(ctx, "ip4", host); err != nil {
		return netip.AddrPort{}, fmt.Errorf("egress proxy %s does not resolve: %v", host, err)
	}
	for _, a := range addrs {
		if ok(a) {
			return netip.AddrPortFrom(a.Unmap(), uint16(pn)), nil
		}
	}
	return netip.AddrPort{}, fmt.Errorf("egress proxy %s resolves only to addresses the host does not connect to for sandboxes %v", host, addrs)
}

// CheckProxyAddress reports whether an egress proxy's address (host:port)
// can be used now: its host resolves (through res) to an address outside
// the forbidden ranges not opened, other than the host's own. The error
// wraps errdefs.ErrInvalidArgument: the daemon answers 400 before the
// sandbox exists or its rules change. Each dial checks again.
func CheckProxyAddress(ctx context.Context, res *net.Resolver, opened []netip.Prefix, address string) error {
	if res == nil {
		res = net.DefaultResolver
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var local localAddrs
	ok := func(a netip.Addr) bool {
		a = a.Unmap()
		return a.Is4() && !netpolicy.IsForbidden(a, opened) && !local.contains(a)
	}
	if _, err := pinProxy(ctx, res, address, ok); err != nil {
		return fmt.Errorf("egressProxy: %v: %w", err, errdefs.ErrInvalidArgument)
	}
	return nil
}

// pinnedDialer reaches the SOCKS5 proxy at the address resolved for this
// connection, whatever address the SOCKS dialer asks for.
type pinnedDialer struct{ to netip.AddrPort }

func (d pinnedDialer) Dial(network, addr string) (net.Conn, error) {
	return d.DialContext(context.Background(), network, addr)
}

func (d pinnedDialer) DialContext(ctx context.Context, _, _ string) (net.Conn, error) {
	var nd net.Dialer
	return nd.DialContext(ctx, "tcp4", d.to.String())
}
