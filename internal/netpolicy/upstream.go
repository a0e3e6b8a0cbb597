package netpolicy

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"

	"github.com/forkbox/forkbox/internal/errdefs"
)

// MaxProxyCredential is RFC 1929's limit on a SOCKS5 username or password.
const MaxProxyCredential = 255

// EgressProxy is E2B's SandboxEgressProxyConfig: the SOCKS5 proxy a
// sandbox's outbound TCP is tunnelled through from the host, after the
// rules have filtered it. The password is never reported back.
type EgressProxy struct {
	// Address is host:port; the host is an IPv4 address or a host name,
	// resolved again at every dial.
	Address  string `json:"address"`
	Username string `json:"username,omitempty"`
	Password string `json:"password,omitempty"`
}

// Redacted returns a copy of p without the password (nil for nil).
func (p *EgressProxy) Redacted() *EgressProxy {
	if p == nil {
		return nil
	}
	return &EgressProxy{Address: p.Address, Username: p.Username}
}

// Host returns the host part of the address: a name or an IPv4 literal.
func (p EgressProxy) Host() string {
	host, _, _ := net.SplitHostPort(p.Address)
	return host
}

// checkEgressProxy validates an egress proxy and returns its normal form:
// host:port with a lower-case name or an IPv4 address outside the ranges
// that stay forbidden, and RFC 1929 credentials (a password only with a
// username). Whether a name resolves is the daemon's to check (see
// sandbox.Config.CheckNetwork): this package does no I/O.
func checkEgressProxy(p *EgressProxy, opened []netip.Prefix) (*EgressProxy, error) {
	if p == nil {
		return nil, nil
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("egressProxy: "+format+": %w", append(args, errdefs.ErrInvalidArgument)...)
	}
	host, port, err := net.SplitHostPort(strings.TrimSpace(p.Address))
	if err != nil {
		return nil, bad("address %q is not host:port", p.Address)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || port[0] == '0' {
		return nil, bad("address %q: port must be 1..65535", p.Address)
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if !a.Is4() {
			return nil, bad("address %q: only IPv4 addresses and host names are valid", p.Address)
		}
		if IsForbidden(a, opened) {
			return nil, bad("address %q lies in a range the host never connects to for sandboxes (private, link-local, loopback or reserved)", p.Address)
		}
	} else {
		host = strings.ToLower(strings.TrimSuffix(host, "."))
		if looksLikeAddr(host) || checkName(host) != nil {
			return nil, bad("address %q: the host is neither an IPv4 address nor a host name", p.Address)
		}
	}
	if len(p.Username) > MaxProxyCredential || len(p.Password) > MaxProxyCredential {
		return nil, bad("username and password are at most %d bytes", MaxProxyCredential)
	}
	if p.Password != "" && p.Username == "" {
		return nil, bad("a password needs a username")
	}
	return &EgressProxy{Address: net.JoinHostPort(host, port), Username: p.Username, Password: p.Password}, nil
}
