package daemon

import (
	"context"
	"fmt"
	"net"
	"net/netip"

	"github.com/forkbox/forkbox/internal/egress"
	"github.com/forkbox/forkbox/internal/netns"
	"github.com/forkbox/forkbox/internal/netpolicy"
)

// EgressOptions configure sandbox egress rules and the egress proxy.
type EgressOptions struct {
	// Open lists forbidden ranges (private, link-local…) sandboxes' rules
	// may allow, e.g. an internal registry's network.
	Open []netip.Prefix
	// DNS is the resolver (host:port) the egress proxy resolves allowed
	// host names with; empty means the host's.
	DNS string
}

// egressProxy is the daemon's egress proxy: its listener exists before
// the sandbox networks (whose NAT rules name its port), and it serves once
// the network manager that knows the policies does.
type egressProxy struct {
	ln    net.Listener
	proxy *egress.Proxy
	done  chan error
}

// listenEgress opens the proxy's port on every address; the nftables
// input chain lets only redirected sandbox connections reach it.
func listenEgress() (*egressProxy, error) {
	ln, err := net.Listen("tcp4", "0.0.0.0:0")
	if err != nil {
		return nil, fmt.Errorf("egress proxy: %w", err)
	}
	return &egressProxy{ln: ln}, nil
}

// port is the proxy's TCP port.
func (e *egressProxy) port() uint16 { return uint16(e.ln.Addr().(*net.TCPAddr).Port) }

// serve starts proxying with the policies nm holds.
func (e *egressProxy) serve(o Options, nm *netns.Manager) error {
	cfg := egress.Config{
		Policies: egress.PolicyFunc(func(src netip.Addr) (netpolicy.Policy, bool) {
			l, ok := nm.LeaseByAddr(src)
			return l.Policy, ok
		}),
		Opened: o.Egress.Open,
		Logger: o.Logger,
	}
	if dns := o.Egress.DNS; dns != "" {
		cfg.Resolver = &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, dns)
		}}
	}
	p, err := egress.New(cfg)
	if err != nil {
		return err
	}
	e.proxy, e.done = p, make(chan error, 1)
	go func() { e.done <- p.Serve(e.ln) }()
	return nil
}

// close stops the proxy (or just its listener if it never served).
func (e *egressProxy) close() {
	if e.proxy == nil {
		e.ln.Close()
		return
	}
	e.proxy.Close()
	<-e.done
}
