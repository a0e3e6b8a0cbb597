// Package egress is the daemon's transparent egress proxy: the kernel
// (internal/netns) redirects ports 80 and 443 of every sandbox whose
// policy names hosts or sets headers here (and every outbound TCP port of
// one whose traffic is tunnelled through a SOCKS5 proxy), and the proxy
// judges each connection by the name it asks for — the HTTP Host on plain
// connections, the TLS SNI on TLS ones. An allowed name is resolved by the proxy itself and the
// connection goes to that address only, never to the address the sandbox
// dialled, so a Host naming an allowed domain sent to another server never
// reaches it, and a name that resolves to a private or otherwise forbidden
// address is refused (no DNS-rebinding bypass). Anything a name rule does
// not allow (no name, an unlisted name) follows the address rules on the
// address the sandbox dialled.
//
// Header transforms (E2B's network.rules) apply to every request of a
// plain connection whose Host has one, and to HTTPS whose SNI has one by
// terminating TLS with the egress CA (intercept.go); a tunnel (socks.go)
// carries what the rules let through, failing closed. A header's
// ${e2b.secrets.…} and ${e2b.identity.tokens.…} are filled in for each
// request through Config.Placeholders (placeholders.go); one that cannot be
// filled in refuses the request, never sends the placeholder.
package egress

import (
	"bufio"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/forkbox/forkbox/internal/netpolicy"
)

// peekTimeout bounds how long a sandbox may take to send the first bytes
// (the request line and headers, or the ClientHello).
const peekTimeout = 10 * time.Second

// Policies finds the egress policy of the sandbox a connection comes from.
type Policies interface {
	// PolicyFor returns the policy of the sandbox whose address is src.
	PolicyFor(src netip.Addr) (netpolicy.Policy, bool)
}

// PolicyFunc adapts a function to Policies.
type PolicyFunc func(src netip.Addr) (netpolicy.Policy, bool)

// PolicyFor implements Policies.
func (f PolicyFunc) PolicyFor(src netip.Addr) (netpolicy.Policy, bool) { return f(src) }

// Config configures a Proxy. Policies is required.
type Config struct {
	Policies Policies
	// Opened are the forbidden ranges the operator opened (netns.Config.Opened).
	Opened []netip.Prefix
	// Resolver resolves allowed names; nil means net.DefaultResolver.
	Resolver *net.Resolver
	// OriginalDst recovers where the sandbox was connecting before the
	// redirect; nil means the conntrack entry (SO_ORIGINAL_DST).
	OriginalDst func(net.Conn) (netip.AddrPort, error)
	// DialTimeout bounds an upstream connect. Default 10 s.
	DialTimeout time.Duration
	// Logger receives denials (rate-limited) and errors.
	Logger *slog.Logger
	// OnDeny, if set, is told of every refused connection with the
	// address of the sandbox it came from (see Denials).
	OnDeny func(src netip.Addr, d netpolicy.Denial)
	// CA issues the certificates of intercepted TLS connections (those
	// whose SNI has a transform); nil leaves every TLS connection end to
	// end, without its transform.
	CA Issuer
	// RootCAs verify the servers of intercepted connections; nil means
	// the system's roots.
	RootCAs *x509.CertPool
	// Sandboxes is the sandboxes' subnet: never a destination.
	Sandboxes netip.Prefix
	// Placeholders fills in the ${e2b.secrets.…} and
	// ${e2b.identity.tokens.…} of rules' header values per request; nil
	// refuses every request whose headers hold one (never sent as written).
	Placeholders Expander
	// WebPorts are the ports whose first bytes are read for a Host or
	// SNI; a tunnelled connection to another port is relayed unread (the
	// server may speak first). Default 80 and 443.
	WebPorts []uint16
}

// Stats counts the proxy's decisions since start.
type Stats struct {
	// Allowed and Denied count connections; Denied includes names that
	// resolved to forbidden addresses.
	Allowed, Denied uint64
}

// Proxy is the egress proxy. Serve it on a listener; Close stops it.
type Proxy struct {
	cfg      Config
	log      *slog.Logger
	local    localAddrs
	allowed  atomic.Uint64
	denied   atomic.Uint64
	limiter  *denialLog
	leaves   *leafCache // nil without Config.CA
	mu       sync.Mutex
	lns      []net.Listener
	conns    map[net.Conn]struct{}
	closed   bool
	inFlight sync.WaitGroup
}

// New returns a proxy.
func New(cfg Config) (*Proxy, error) {
	if cfg.Policies == nil {
		return nil, errors.New("egress: Config.Policies is required")
	}
	if cfg.Resolver == nil {
		cfg.Resolver = net.DefaultResolver
	}
	if cfg.OriginalDst == nil {
		cfg.OriginalDst = originalDst
	}
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.WebPorts == nil {
		cfg.WebPorts = []uint16{80, 443}
	}
	p := &Proxy{cfg: cfg, log: cfg.Logger, limiter: newDenialLog(), conns: map[net.Conn]struct{}{}}
	if cfg.CA != nil {
		p.leaves = &leafCache{ca: cfg.CA}
	}
	return p, nil
}

// Stats returns the counters.
func (p *Proxy) Stats() Stats {
	return Stats{Allowed: p.allowed.Load(), Denied: p.denied.Load()}
}

// Serve accepts connections on ln until Close.
func (p *Proxy) Serve(ln net.Listener) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return net.ErrClosed
	}
	p.lns = append(p.lns, ln)
	p.mu.Unlock()
	for {
		c, err := ln.Accept()
		if err != nil {
			if p.isClosed() {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			return fmt.Errorf("egress accept: %w", err)
		}
		if !p.track(c) {
			c.Close()
			return nil
		}
		p.inFlight.Add(1)
		go func() {
			defer p.inFlight.Done()
			defer p.untrack(c)
			p.handle(c)
		}()
	}
}

// Close stops the listeners and cuts every proxied connection.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	for _, ln := range p.lns {
		ln.Close()
	}
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.inFlight.Wait()
	return nil
}

func (p *Proxy) isClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	c.Close()
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

// conn is one sandbox connection being judged.
type conn struct {
	c      net.Conn
	br     *bufio.Reader
	src    netip.Addr
	dst    netip.AddrPort
	policy netpolicy.Policy
}

// handle judges and, if allowed, relays one connection.
func (p *Proxy) handle(c net.Conn) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	src := netip.MustParseAddrPort(c.RemoteAddr().String()).Addr().Unmap()
	pol, ok := p.cfg.Policies.PolicyFor(src)
	if !ok {
		p.deny(src, netip.AddrPort{}, "", decision{reason: netpolicy.ReasonForbidden, why: "connection from no known sandbox"})
		return
	}
	dst, err := p.cfg.OriginalDst(c)
	if err != nil {
		p.log.Warn("egress: no original destination", "src", src, "err", err)
		return
	}
	cn := &conn{c: c, br: bufio.NewReaderSize(c, 16<<10), src: src, dst: dst, policy: pol}
	if pol.Tunnels() && !slices.Contains(p.cfg.WebPorts, dst.Port()) {
		p.relayRaw(ctx, cn)
		return
	}
	c.SetReadDeadline(time.Now().Add(peekTimeout))
	first, err := cn.br.Peek(1)
	if err != nil {
		return
	}
	if first[0] == 0x16 { // a TLS handshake record
		p.handleTLS(ctx, cn)
		return
	}
	p.handleHTTP(ctx, cn)
}

// deny counts, reports and logs (rate-limited) a refused connection.
func (p *Proxy) deny(src netip.Addr, dst netip.AddrPort, name string, d decision) {
	p.denied.Add(1)
	if p.cfg.OnDeny != nil {
		p.cfg.OnDeny(src, netpolicy.Denial{Time: time.Now(), Layer: netpolicy.LayerProxy,
			Destination: dst.String(), Name: name, Reason: d.reason, Rule: d.why})
	}
	if p.limiter.allow(src) {
		p.log.Info("egress denied", "sandbox_addr", src, "dst", dst, "name", name, "reason", d.reason, "rule", d.why)
	}
}
