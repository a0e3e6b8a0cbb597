package netpolicy

import (
	"fmt"
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/forkbox/forkbox/internal/errdefs"
)

func pfxs(s ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, p := range s {
		out = append(out, netip.MustParsePrefix(p))
	}
	return out
}

func TestCompile(t *testing.T) {
	tests := []struct {
		name     string
		rules    Rules
		internet bool
		opened   []netip.Prefix
		norm     Rules
		want     Policy
	}{
		{name: "empty", internet: true},
		{name: "no internet denies all", internet: false, want: Policy{Deny: pfxs("0.0.0.0/0")}},
		{
			name:     "addresses and CIDRs are canonical and merged",
			rules:    Rules{DenyOut: []string{"198.51.100.7", "198.51.100.0/25", "203.0.113.9/24"}},
			internet: true,
			norm:     Rules{DenyOut: []string{"198.51.100.7/32", "198.51.100.0/25", "203.0.113.0/24"}},
			want:     Policy{Deny: pfxs("198.51.100.0/25", "203.0.113.0/24")},
		},
		{
			name:     "names, wildcards, case and duplicates",
			rules:    Rules{AllowOut: []string{"API.Example.com.", "*.Example.org", "api.example.com", "198.51.100.1"}, DenyOut: []string{"0.0.0.0/0"}},
			internet: true,
			norm:     Rules{AllowOut: []string{"api.example.com", "*.example.org", "198.51.100.1/32"}, DenyOut: []string{"0.0.0.0/0"}},
			want:     Policy{Allow: pfxs("198.51.100.1/32"), Deny: pfxs("0.0.0.0/0"), Domains: []string{"api.example.com"}, Wildcards: []string{"example.org"}},
		},
		{
			name:     "allow partly inside a forbidden range is kept",
			rules:    Rules{AllowOut: []string{"0.0.0.0/0"}},
			internet: false,
			norm:     Rules{AllowOut: []string{"0.0.0.0/0"}},
			want:     Policy{Allow: pfxs("0.0.0.0/0"), Deny: pfxs("0.0.0.0/0")},
		},
		{
			name:     "an opened range may be allowed",
			rules:    Rules{AllowOut: []string{"10.9.0.0/16"}},
			internet: true,
			opened:   pfxs("10.9.0.0/16"),
			norm:     Rules{AllowOut: []string{"10.9.0.0/16"}},
			want:     Policy{Allow: pfxs("10.9.0.0/16")},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			norm, p, err := Compile(tt.rules, tt.internet, tt.opened)
			if err != nil {
				t.Fatalf("Compile: %v", err)
			}
			if !reflect.DeepEqual(norm, tt.norm) {
				t.Errorf("rules = %+v, want %+v", norm, tt.norm)
			}
			if !reflect.DeepEqual(p, tt.want) {
				t.Errorf("policy = %+v, want %+v", p, tt.want)
			}
		})
	}
}

func TestCompileRefuses(t *testing.T) {
	many := make([]string, MaxEntries+1)
	for i := range many {
		many[i] = fmt.Sprintf("198.51.%d.%d", i/256, i%256)
	}
	tests := []struct {
		name  string
		rules Rules
		say   string // part of the message
	}{
		{"malformed CIDR", Rules{DenyOut: []string{"198.51.100.0/33"}}, "not an IP address or CIDR"},
		{"short address", Rules{AllowOut: []string{"198.51.100"}}, "not an IP address or CIDR"},
		{"name in denyOut", Rules{DenyOut: []string{"example.com"}}, "only valid in allowOut"},
		{"bad name", Rules{AllowOut: []string{"exa mple.com"}}, "host name"},
		{"label with hyphen", Rules{AllowOut: []string{"-x.example.com"}}, "host name"},
		{"wildcard in the middle", Rules{AllowOut: []string{"a.*.example.com"}}, "host name"},
		{"bare star", Rules{AllowOut: []string{"*"}}, "host name"},
		{"IPv6", Rules{AllowOut: []string{"2001:db8::/32"}}, "IPv6"},
		{"metadata", Rules{AllowOut: []string{"169.254.169.254"}}, "never reach"},
		{"private", Rules{AllowOut: []string{"10.1.0.0/16"}}, "never reach"},
		{"too many allow", Rules{AllowOut: many}, fmt.Sprintf("the limit is %d", MaxEntries)},
		{"too many deny", Rules{DenyOut: many}, fmt.Sprintf("the limit is %d", MaxEntries)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := Compile(tt.rules, true, nil)
			if err == nil || !errdefs.IsInvalidArgument(err) || !strings.Contains(err.Error(), tt.say) {
				t.Fatalf("Compile(%+v) = %v, want an invalid-argument error saying %q", tt.rules, err, tt.say)
			}
		})
	}
}

func TestAllowsName(t *testing.T) {
	p := Policy{Domains: []string{"api.example.com"}, Wildcards: []string{"example.org"}}
	tests := []struct {
		host string
		want bool
	}{
		{"api.example.com", true},
		{"API.example.com.", true},
		{"example.com", false},
		{"x.api.example.com", false},
		{"a.example.org", true},
		{"a.b.c.example.org", true},
		{"example.org", false},
		{"badexample.org", false},
		{"", false},
	}
	for _, tt := range tests {
		if got := p.AllowsName(tt.host); got != tt.want {
			t.Errorf("AllowsName(%q) = %v, want %v", tt.host, got, tt.want)
		}
	}
}

func TestAllowsAddr(t *testing.T) {
	_, p, err := Compile(Rules{AllowOut: []string{"198.51.100.8/29"}, DenyOut: []string{"198.51.100.0/24"}}, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		addr   string
		opened []netip.Prefix
		want   bool
	}{
		{"198.51.100.9", nil, true},  // allow beats deny
		{"198.51.100.7", nil, false}, // denied
		{"203.0.113.1", nil, true},   // neither
		{"169.254.169.254", nil, false},
		{"10.0.0.1", nil, false},
		{"10.0.0.1", pfxs("10.0.0.0/24"), true},
		{"127.0.0.1", nil, false},
		{"2001:db8::1", nil, false},
		{"::ffff:198.51.100.9", nil, true},
	}
	for _, tt := range tests {
		if got := p.AllowsAddr(netip.MustParseAddr(tt.addr), tt.opened); got != tt.want {
			t.Errorf("AllowsAddr(%s, %v) = %v, want %v", tt.addr, tt.opened, got, tt.want)
		}
	}
}
