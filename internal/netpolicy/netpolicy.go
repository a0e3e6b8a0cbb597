// Package netpolicy is a sandbox's egress policy: the rules as the API
// states them (E2B's network.allowOut / network.denyOut, rules,
// egressProxy and allow_internet_access), their validation, and the
// compiled form the kernel (internal/netns) and the egress proxy
// (internal/egress) enforce; and the inbound settings of the data plane
// (maskRequestHost, httpsPorts).
//
// Semantics (E2B's): allowOut lists exceptions to denyOut — on its own it
// restricts nothing; allow wins over deny; host names are valid only in
// allowOut; allow_internet_access false is deny 0.0.0.0/0. Whatever the
// rules say, Forbidden destinations stay unreachable unless the operator
// opens a range. Sandboxes have no IPv6: IPv6 entries are refused.
package netpolicy

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"go4.org/netipx"

	"github.com/forkbox/forkbox/internal/errdefs"
)

// MaxEntries caps each of allowOut and denyOut: every entry costs kernel
// set elements and proxy lookups, and no sane policy needs more.
const MaxEntries = 256

// Rules is the egress policy of one sandbox as the API states it. The
// zero value restricts nothing.
type Rules struct {
	// AllowOut lists IPv4 addresses, CIDRs, host names and *.wildcards
	// the sandbox may reach even when DenyOut covers them.
	AllowOut []string `json:"allowOut,omitempty"`
	// DenyOut lists IPv4 addresses and CIDRs the sandbox may not reach.
	DenyOut []string `json:"denyOut,omitempty"`
	// Rules are E2B's per-domain transforms of the sandbox's HTTP and
	// HTTPS requests, keyed by host name or *.wildcard. They grant no
	// access: allowOut and denyOut decide what may be reached.
	Rules map[string][]Rule `json:"rules,omitempty"`
	// EgressProxy, when set, tunnels the sandbox's outbound TCP through a
	// SOCKS5 proxy after filtering.
	EgressProxy *EgressProxy `json:"egressProxy,omitempty"`
}

// IsZero reports whether r has no entries.
func (r Rules) IsZero() bool {
	return len(r.AllowOut) == 0 && len(r.DenyOut) == 0 && len(r.Rules) == 0 && r.EgressProxy == nil
}

// Forbidden are the destinations no rule opens: this host's neighbours on
// private networks, link-local and cloud metadata (169.254.0.0/16), CGNAT,
// loopback, multicast and reserved space. The host itself and the other
// sandboxes are kept away by the kernel rules of internal/netns.
var Forbidden = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("10.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("127.0.0.0/8"),
	netip.MustParsePrefix("169.254.0.0/16"),
	netip.MustParsePrefix("172.16.0.0/12"),
	netip.MustParsePrefix("192.168.0.0/16"),
	netip.MustParsePrefix("224.0.0.0/3"),
}

// Policy is the compiled form of Rules plus allow_internet_access: merged,
// non-overlapping address ranges and lower-cased names. It is what is
// enforced and what internal/netns persists.
type Policy struct {
	// Allow and Deny are the address exceptions and denials.
	Allow []netip.Prefix `json:"allow,omitempty"`
	Deny  []netip.Prefix `json:"deny,omitempty"`
	// Domains are exact host names; Wildcards are the suffixes of
	// *.suffix entries (any depth below suffix, not suffix itself).
	Domains   []string `json:"domains,omitempty"`
	Wildcards []string `json:"wildcards,omitempty"`
	// Transforms are the headers set on requests by rules key (a name or
	// "*.suffix"), see TransformFor.
	Transforms map[string][]Header `json:"transforms,omitempty"`
	// Proxy is the SOCKS5 proxy outbound TCP is tunnelled through, if any.
	Proxy *EgressProxy `json:"proxy,omitempty"`
}

// Proxied reports whether the egress proxy must see the sandbox's web
// ports (80, 443): to judge names or to set headers.
func (p Policy) Proxied() bool { return p.HasNames() || p.HasTransforms() }

// Tunnels reports whether every outbound TCP connection goes through the
// egress proxy, to be tunnelled through p.Proxy.
func (p Policy) Tunnels() bool { return p.Proxy != nil }

// HasNames reports whether p allows any host name: then ports 80 and 443
// go through the egress proxy and the DNS resolver is reachable.
func (p Policy) HasNames() bool { return len(p.Domains)+len(p.Wildcards) > 0 }

// AllowsName reports whether host (a name, any case, an optional trailing
// dot) is allowed by a Domains or Wildcards entry.
func (p Policy) AllowsName(host string) bool {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	if host == "" {
		return false
	}
	if slices.Contains(p.Domains, host) {
		return true
	}
	for _, w := range p.Wildcards {
		if strings.HasSuffix(host, "."+w) {
			return true
		}
	}
	return false
}

// AllowsAddr reports whether the address rules let a connection to a
// through: not Forbidden (unless opened), and allowed or not denied.
func (p Policy) AllowsAddr(a netip.Addr, opened []netip.Prefix) bool {
	a = a.Unmap()
	if !a.Is4() || IsForbidden(a, opened) {
		return false
	}
	if containsAddr(p.Allow, a) {
		return true
	}
	return !containsAddr(p.Deny, a)
}

// IsForbidden reports whether a is in a Forbidden range not covered by
// one of the operator's opened ranges.
func IsForbidden(a netip.Addr, opened []netip.Prefix) bool {
	a = a.Unmap()
	return containsAddr(Forbidden, a) && !containsAddr(opened, a)
}

func containsAddr(ps []netip.Prefix, a netip.Addr) bool {
	for _, p := range ps {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// Compile validates r and compiles it with allowInternet (false adds
// 0.0.0.0/0 to the denials). opened are the Forbidden ranges the operator
// has opened: an allowOut entry lying wholly in a range that stays
// forbidden is refused, since it could never take effect. It returns the
// normalised rules (canonical CIDRs, lower-case names, duplicates dropped)
// and the policy. Every error wraps errdefs.ErrInvalidArgument; nothing is
// returned half-validated.
func Compile(r Rules, allowInternet bool, opened []netip.Prefix) (Rules, Policy, error) {
	if n := len(r.AllowOut); n > MaxEntries {
		return Rules{}, Policy{}, fmt.Errorf("allowOut has %d entries, the limit is %d: %w", n, MaxEntries, errdefs.ErrInvalidArgument)
	}
	if n := len(r.DenyOut); n > MaxEntries {
		return Rules{}, Policy{}, fmt.Errorf("denyOut has %d entries, the limit is %d: %w", n, MaxEntries, errdefs.ErrInvalidArgument)
	}
	var norm Rules
	var p Policy
	var allow, deny netipx.IPSetBuilder
	for _, e := range r.AllowOut {
		n, err := addAllow(e, &allow, &p, opened)
		if err != nil {
			return Rules{}, Policy{}, err
		}
		norm.AllowOut = appendNew(norm.AllowOut, n)
	}
	for _, e := range r.DenyOut {
		pfx, err := parseAddrEntry("denyOut", e)
		if err != nil {
			return Rules{}, Policy{}, err
		}
		deny.AddPrefix(pfx)
		norm.DenyOut = appendNew(norm.DenyOut, pfx.String())
	}
	if !allowInternet {
		deny.AddPrefix(netip.MustParsePrefix("0.0.0.0/0"))
	}
	p.Allow, p.Deny = prefixes(&allow), prefixes(&deny)
	var err error
	if norm.Rules, p.Transforms, err = compileRules(r.Rules); err != nil {
		return Rules{}, Policy{}, err
	}
	if norm.EgressProxy, err = checkEgressProxy(r.EgressProxy, opened); err != nil {
		return Rules{}, Policy{}, err
	}
	p.Proxy = norm.EgressProxy
	return norm, p, nil
}

// addAllow adds one allowOut entry to the builder or the policy's names
// and returns its normal form.
func addAllow(e string, allow *netipx.IPSetBuilder, p *Policy, opened []netip.Prefix) (string, error) {
	if looksLikeAddr(e) {
		pfx, err := parseAddrEntry("allowOut", e)
		if err != nil {
			return "", err
		}
		if whollyForbidden(pfx, opened) {
			return "", fmt.Errorf("allowOut %q lies in a range sandboxes may never reach (private, link-local, loopback or reserved): %w", e, errdefs.ErrInvalidArgument)
		}
		allow.AddPrefix(pfx)
		return pfx.String(), nil
	}
	name, wild, err := parseName(e)
	if err != nil {
		return "", err
	}
	if wild {
		p.Wildcards = appendNew(p.Wildcards, name)
		return "*." + name, nil
	}
	p.Domains = appendNew(p.Domains, name)
	return name, nil
}

// closedSet is Forbidden minus the opened ranges.
func closedSet(opened []netip.Prefix) *netipx.IPSet {
	var b netipx.IPSetBuilder
	for _, f := range Forbidden {
		b.AddPrefix(f)
	}
	for _, o := range opened {
		b.RemovePrefix(o)
	}
	s, _ := b.IPSet()
	return s
}

// whollyForbidden reports whether every address of pfx stays forbidden.
func whollyForbidden(pfx netip.Prefix, opened []netip.Prefix) bool {
	return closedSet(opened).ContainsPrefix(pfx)
}

// looksLikeAddr tells address entries from names: a name's last label is
// never all digits, an address's always is (or it is IPv6).
func looksLikeAddr(e string) bool {
	host, _, _ := strings.Cut(e, "/")
	if strings.Contains(host, ":") {
		return true
	}
	i := strings.LastIndexByte(host, '.')
	last := host[i+1:]
	if last == "" {
		return false
	}
	for _, c := range last {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// parseAddrEntry parses an IPv4 address or CIDR (host bits are masked).
func parseAddrEntry(field, e string) (netip.Prefix, error) {
	var pfx netip.Prefix
	var err error
	if strings.Contains(e, "/") {
		pfx, err = netip.ParsePrefix(e)
	} else {
		var a netip.Addr
		if a, err = netip.ParseAddr(e); err == nil {
			pfx = netip.PrefixFrom(a, a.BitLen())
		}
	}
	if err != nil {
		if field == "denyOut" && !looksLikeAddr(e) {
			return netip.Prefix{}, fmt.Errorf("denyOut %q: host names are only valid in allowOut: %w", e, errdefs.ErrInvalidArgument)
		}
		return netip.Prefix{}, fmt.Errorf("%s %q is not an IP address or CIDR: %w", field, e, errdefs.ErrInvalidArgument)
	}
	if !pfx.Addr().Is4() {
		return netip.Prefix{}, fmt.Errorf("%s %q: sandboxes have no IPv6, only IPv4 entries are valid: %w", field, e, errdefs.ErrInvalidArgument)
	}
	return pfx.Masked(), nil
}

// parseName validates a host name or *.wildcard; it returns the lower-case
// name (the suffix for a wildcard).
func parseName(e string) (string, bool, error) {
	name := strings.ToLower(strings.TrimSuffix(e, "."))
	wild := false
	if rest, ok := strings.CutPrefix(name, "*."); ok {
		name, wild = rest, true
	}
	if err := checkName(name); err != nil {
		return "", false, fmt.Errorf("allowOut %q is not an IP address, CIDR, host name or *.wildcard: %v: %w", e, err, errdefs.ErrInvalidArgument)
	}
	return name, wild, nil
}

// checkName applies RFC 1123 host-name syntax.
func checkName(name string) error {
	if name == "" || len(name) > 253 {
		return fmt.Errorf("length %d not in 1..253", len(name))
	}
	for _, label := range strings.Split(name, ".") {
		if label == "" || len(label) > 63 {
			return fmt.Errorf("label %q: length not in 1..63", label)
		}
		if label[0] == '-' || label[len(label)-1] == '-' {
			return fmt.Errorf("label %q starts or ends with '-'", label)
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return fmt.Errorf("label %q: character %q", label, c)
			}
		}
	}
	return nil
}

func prefixes(b *netipx.IPSetBuilder) []netip.Prefix {
	s, _ := b.IPSet() // only valid IPv4 prefixes were added
	if out := s.Prefixes(); len(out) > 0 {
		return out
	}
	return nil // absent in JSON, equal in tests
}

func appendNew(list []string, s string) []string {
	if slices.Contains(list, s) {
		return list
	}
	return append(list, s)
}
