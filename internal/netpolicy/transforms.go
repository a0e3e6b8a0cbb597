package netpolicy

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sort"
	"strings"

	"golang.org/x/net/http/httpguts"

	"github.com/forkbox/forkbox/internal/errdefs"
)

// Caps of E2B's per-domain rules: every header is copied into matching
// requests by the egress proxy and kept in the sandbox's record.
const (
	MaxRuleDomains     = 64
	MaxRulesPerDomain  = 16
	MaxHeadersPerRule  = 32
	MaxHeaderValueLen  = 8 << 10
	MaxRulesTotalBytes = 64 << 10
)

// Rule is one of E2B's per-domain rules (SandboxNetworkRule): a transform
// of the sandbox's HTTP and HTTPS requests to the domain.
type Rule struct {
	Transform *Transform `json:"transform,omitempty"`
}

// Transform is SandboxNetworkTransform: headers set on a matching request,
// replacing a header of the same name the sandbox sent.
type Transform struct {
	Headers map[string]string `json:"headers,omitempty"`
}

// Header is one header a compiled transform sets.
type Header struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// refusedHeaders are the headers a rule may not set: hop-by-hop headers and
// those that frame or route the request, which the proxy must own.
var refusedHeaders = []string{
	"Connection", "Content-Length", "Expect", "Host", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Proxy-Connection", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

// HasTransforms reports whether p sets headers on some domain's requests:
// then ports 80 and 443 go through the egress proxy.
func (p Policy) HasTransforms() bool { return len(p.Transforms) > 0 }

// TransformFor returns the headers to set on a request to host and the
// rules key that matched: an exact key beats the longest matching
// wildcard, and rule sets are not merged.
func (p Policy) TransformFor(host string) (string, []Header, bool) {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	if host == "" || len(p.Transforms) == 0 {
		return "", nil, false
	}
	if hs, ok := p.Transforms[host]; ok {
		return host, hs, true
	}
	for suffix := host; ; {
		_, rest, found := strings.Cut(suffix, ".")
		if !found {
			return "", nil, false
		}
		if hs, ok := p.Transforms["*."+rest]; ok {
			return "*." + rest, hs, true
		}
		suffix = rest
	}
}

// compileRules validates E2B's rules map and returns its normal form
// (lower-case keys) and the header list of each key: the rules' headers in
// order, a later rule's header replacing an earlier one of the same name.
func compileRules(in map[string][]Rule) (map[string][]Rule, map[string][]Header, error) {
	if len(in) == 0 {
		return nil, nil, nil
	}
	if len(in) > MaxRuleDomains {
		return nil, nil, fmt.Errorf("rules has %d domains, the limit is %d: %w", len(in), MaxRuleDomains, errdefs.ErrInvalidArgument)
	}
	norm := make(map[string][]Rule, len(in))
	compiled := make(map[string][]Header, len(in))
	total := 0
	for _, raw := range slices.Sorted(maps.Keys(in)) {
		key, err := ruleKey(raw)
		if err != nil {
			return nil, nil, err
		}
		if _, dup := norm[key]; dup {
			return nil, nil, fmt.Errorf("rules %q: the domain is listed twice (keys are case-insensitive): %w", raw, errdefs.ErrInvalidArgument)
		}
		rules, headers, n, err := compileDomain(raw, in[raw])
		if err != nil {
			return nil, nil, err
		}
		if total += n; total > MaxRulesTotalBytes {
			return nil, nil, fmt.Errorf("rules: headers total more than %d bytes: %w", MaxRulesTotalBytes, errdefs.ErrInvalidArgument)
		}
		norm[key] = rules
		if len(headers) > 0 {
			compiled[key] = headers
		}
	}
	if len(compiled) == 0 {
		compiled = nil
	}
	return norm, compiled, nil
}

// compileDomain validates the rules of one key; n is their size in bytes.
func compileDomain(key string, rules []Rule) ([]Rule, []Header, int, error) {
	if len(rules) > MaxRulesPerDomain {
		return nil, nil, 0, fmt.Errorf("rules %q has %d rules, the limit is %d: %w", key, len(rules), MaxRulesPerDomain, errdefs.ErrInvalidArgument)
	}
	out := make([]Rule, 0, len(rules))
	var headers []Header
	n := 0
	for i, r := range rules {
		if r.Transform == nil || len(r.Transform.Headers) == 0 {
			out = append(out, Rule{})
			continue
		}
		where := fmt.Sprintf("rules %q[%d].transform.headers", key, i)
		hs, size, err := checkHeaders(where, r.Transform.Headers)
		if err != nil {
			return nil, nil, 0, err
		}
		n += size
		for _, h := range hs {
			headers = slices.DeleteFunc(headers, func(o Header) bool { return o.Name == h.Name })
			headers = append(headers, h)
		}
		out = append(out, Rule{Transform: &Transform{Headers: r.Transform.Headers}})
	}
	return out, headers, n, nil
}

// checkHeaders validates one transform's headers and returns them with
// canonical names, sorted (a map has no order; names are unique).
func checkHeaders(where string, in map[string]string) ([]Header, int, error) {
	if len(in) > MaxHeadersPerRule {
		return nil, 0, fmt.Errorf("%s has %d headers, the limit is %d: %w", where, len(in), MaxHeadersPerRule, errdefs.ErrInvalidArgument)
	}
	out := make([]Header, 0, len(in))
	n := 0
	for name, value := range in {
		if !httpguts.ValidHeaderFieldName(name) {
			return nil, 0, fmt.Errorf("%s[%q]: not a valid header name: %w", where, name, errdefs.ErrInvalidArgument)
		}
		canon := http.CanonicalHeaderKey(name)
		if slices.Contains(refusedHeaders, canon) {
			return nil, 0, fmt.Errorf("%s[%q]: a rule may not set %s (hop-by-hop, framing or routing header): %w", where, name, canon, errdefs.ErrInvalidArgument)
		}
		if len(value) > MaxHeaderValueLen || !httpguts.ValidHeaderFieldValue(value) {
			return nil, 0, fmt.Errorf("%s[%q]: the value must be at most %d bytes without CR, LF or other control characters: %w", where, name, MaxHeaderValueLen, errdefs.ErrInvalidArgument)
		}
		if HasPlaceholder(value) {
			if _, err := Expand(value, func(Ref) (string, error) { return "", nil }); err != nil {
				return nil, 0, fmt.Errorf("%s[%q]: %w", where, name, err)
			}
		}
		if slices.ContainsFunc(out, func(h Header) bool { return h.Name == canon }) {
			return nil, 0, fmt.Errorf("%s[%q]: the header is listed twice (names are case-insensitive): %w", where, name, errdefs.ErrInvalidArgument)
		}
		out = append(out, Header{Name: canon, Value: value})
		n += len(name) + len(value)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, n, nil
}

// ruleKey validates a rules key: a host name or *.suffix (any depth below
// suffix, not suffix itself), lower-cased; bare "*" and addresses are not
// keys.
func ruleKey(raw string) (string, error) {
	key := strings.ToLower(strings.TrimSuffix(raw, "."))
	name, wild := strings.CutPrefix(key, "*.")
	if looksLikeAddr(name) {
		return "", fmt.Errorf("rules %q: keys are host names or *.wildcards, not addresses: %w", raw, errdefs.ErrInvalidArgument)
	}
	if err := checkName(name); err != nil {
		return "", fmt.Errorf("rules %q is not a host name or *.wildcard: %v: %w", raw, err, errdefs.ErrInvalidArgument)
	}
	if wild {
		return "*." + name, nil
	}
	return name, nil
}
