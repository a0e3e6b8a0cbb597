package daemon

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/forkbox/forkbox/internal/egress"
	"github.com/forkbox/forkbox/internal/eventlog"
	"github.com/forkbox/forkbox/internal/netns"
	"github.com/forkbox/forkbox/internal/netpolicy"
	"github.com/forkbox/forkbox/internal/tlsca"
)

// The egress CA's directory under the data dir and its name.
const (
	egressCADir  = "egress-ca"
	egressCAName = "forkbox egress CA"
)

// EgressOptions configure sandbox egress rules and the egress proxy.
type EgressOptions struct {
	// Open lists forbidden ranges (private, link-local…) sandboxes' rules
	// may allow, e.g. an internal registry's network.
	Open []netip.Prefix
	// DNS is the resolver (host:port) the egress proxy resolves allowed
	// host names with; empty means the host's.
	DNS string
	// CAFile is a PEM file of root certificates the egress proxy trusts
	// besides the system's when it re-encrypts intercepted HTTPS.
	CAFile string

	// fill fills in rules' placeholders once the daemon can (prepare
	// makes it; Run sets it).
	fill *fillHook

	// Set by prepare: the egress CA (<data-dir>/egress-ca), the upstream
	// roots and the resolver.
	ca       *tlsca.CA
	caPEM    []byte
	roots    *x509.CertPool
	resolver *net.Resolver
}

// prepare loads (or makes, once) the egress CA the proxy intercepts HTTPS
// with — a CA of its own, apart from the data plane's in <data-dir>/tls,
// since every sandbox trusts it — and the roots it verifies servers with.
func (e *EgressOptions) prepare(dataDir string) error {
	ca, err := tlsca.LoadOrCreateCA(filepath.Join(dataDir, egressCADir), egressCAName)
	if err != nil {
		return fmt.Errorf("egress ca: %w", err)
	}
	roots, err := x509.SystemCertPool()
	if err != nil {
		roots = x509.NewCertPool()
	}
	if e.CAFile != "" {
		b, err := os.ReadFile(e.CAFile)
		if err != nil {
			return fmt.Errorf("--egress-ca-file: %w", err)
		}
		if !roots.AppendCertsFromPEM(b) {
			return fmt.Errorf("--egress-ca-file %s: no PEM certificate in it", e.CAFile)
		}
	}
	e.ca, e.roots, e.fill = ca, roots, &fillHook{}
	e.caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Cert.Raw})
	e.resolver = net.DefaultResolver
	if dns := e.DNS; dns != "" {
		e.resolver = &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, dns)
		}}
	}
	return nil
}

// checkNetwork is the Manager's CheckNetwork: an egress proxy's host must
// resolve, now, to an address the host may connect to.
func (e *EgressOptions) checkNetwork(ctx context.Context, r netpolicy.Rules) error {
	if r.EgressProxy == nil {
		return nil
	}
	return egress.CheckProxyAddress(ctx, e.resolver, e.Open, r.EgressProxy.Address)
}

// denialPoll is how often the kernel's per-sandbox refusal counters are
// read: the delay before a dropped packet shows in a sandbox's counts.
const denialPoll = time.Second

// egressEvent turns a denial into an event of the sandbox's log.
func egressEvent(d netpolicy.Denial) eventlog.Event {
	fields := map[string]string{"layer": d.Layer, "destination": d.Destination, "reason": d.Reason, "rule": d.Rule}
	msg := "egress denied: " + d.Destination
	if d.Name != "" {
		fields["name"] = d.Name
		msg += " (" + d.Name + ")"
	}
	return eventlog.Event{Time: d.Time, Level: eventlog.LevelWarn, Logger: eventlog.LoggerEgress,
		Message: msg, Fields: fields}
}

// egressProxy is the daemon's egress proxy: its listener exists before
// the sandbox networks (whose NAT rules name its port), and it serves once
// the network manager that knows the policies does.
type egressProxy struct {
	ln      net.Listener
	proxy   *egress.Proxy
	done    chan error
	denials *egress.Denials
	stop    context.CancelFunc
	owners  netOwners
}

// netOwners finds the sandbox a network belongs to: networks are keyed by
// container, which is not the sandbox id for one restored into a standby
// container. A miss reloads the map (a standby container's network has no
// sandbox yet: the same key reloads again only after missRetry).
type netOwners struct {
	mu     sync.Mutex
	load   func() map[string]string
	m      map[string]string
	missed map[string]time.Time
}

// setLoad sets where the map comes from (the runtime, made after the proxy).
func (o *netOwners) setLoad(f func() map[string]string) {
	o.mu.Lock()
	o.load = f
	o.mu.Unlock()
}

func (o *netOwners) sandbox(key string) (string, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if id, ok := o.m[key]; ok {
		return id, true
	}
	if o.load == nil || time.Since(o.missed[key]) < missRetry {
		return "", false
	}
	o.m = o.load()
	id, ok := o.m[key]
	if o.missed == nil || len(o.missed) > 4096 {
		o.missed = map[string]time.Time{}
	}
	if ok {
		delete(o.missed, key)
	} else {
		o.missed[key] = time.Now()
	}
	return id, ok
}

// missRetry bounds how often one unknown network key reloads the owners.
const missRetry = 100 * time.Millisecond

// refusals reads the kernel's counts keyed by sandbox id.
func (e *egressProxy) refusals(nm *netns.Manager) func() ([]netpolicy.KernelCount, error) {
	return func() ([]netpolicy.KernelCount, error) {
		kcs, err := nm.Refusals()
		out := kcs[:0]
		for _, kc := range kcs {
			if id, ok := e.owners.sandbox(kc.ID); ok {
				kc.ID = id
				out = append(out, kc)
			}
		}
		return out, err
	}
}

// listenEgress opens the proxy's port on every address; the nftables
// input chain lets only redirected sandbox connections reach it.
func listenEgress(den *egress.Denials) (*egressProxy, error) {
	ln, err := net.Listen("tcp4", "0.0.0.0:0")
	if err != nil {
		return nil, fmt.Errorf("egress proxy: %w", err)
	}
	return &egressProxy{ln: ln, denials: den}, nil
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
		Opened:       o.Egress.Open,
		Logger:       o.Logger,
		Resolver:     o.Egress.resolver,
		CA:           o.Egress.ca,
		RootCAs:      o.Egress.roots,
		Sandboxes:    nm.Subnet(),
		Placeholders: e.expander(nm, o.Egress.fill),
		OnDeny: func(src netip.Addr, d netpolicy.Denial) {
			if l, ok := nm.LeaseByAddr(src); ok {
				if id, ok := e.owners.sandbox(l.ID); ok {
					e.denials.Proxy(id, d)
				}
			}
		},
	}
	p, err := egress.New(cfg)
	if err != nil {
		return err
	}
	e.proxy, e.done = p, make(chan error, 1)
	go func() { e.done <- p.Serve(e.ln) }()
	ctx, stop := context.WithCancel(context.Background())
	e.stop = stop
	go e.denials.Watch(ctx, denialPoll, e.refusals(nm), o.Logger)
	return nil
}

// close stops the proxy (or just its listener if it never served).
func (e *egressProxy) close() {
	if e.proxy == nil {
		e.ln.Close()
		return
	}
	e.stop()
	e.proxy.Close()
	<-e.done
}
