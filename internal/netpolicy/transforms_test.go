package netpolicy

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/forkbox/forkbox/internal/errdefs"
)

func headers(kv ...string) *Transform {
	t := &Transform{Headers: map[string]string{}}
	for i := 0; i < len(kv); i += 2 {
		t.Headers[kv[i]] = kv[i+1]
	}
	return t
}

func TestCompileRules(t *testing.T) {
	r := Rules{Rules: map[string][]Rule{
		"API.Example.com.": {{Transform: headers("authorization", "Bearer 1", "X-A", "a")}, {Transform: headers("Authorization", "Bearer 2")}},
		"*.Example.com":    {{Transform: headers("X-Wild", "w")}},
		"*.a.example.com":  {{Transform: headers("X-Deeper", "d")}},
		"plain.test":       {{}},
	}}
	norm, p, err := Compile(r, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := norm.Rules["api.example.com"]; !ok || len(norm.Rules) != 4 {
		t.Errorf("normal rules keys: %v", norm.Rules)
	}
	want := map[string][]Header{
		"api.example.com": {{"X-A", "a"}, {"Authorization", "Bearer 2"}}, // in the order they are set
		"*.example.com":   {{"X-Wild", "w"}},
		"*.a.example.com": {{"X-Deeper", "d"}},
	}
	if !reflect.DeepEqual(p.Transforms, want) {
		t.Errorf("transforms = %v, want %v", p.Transforms, want)
	}
	if !p.HasTransforms() || !p.Proxied() || p.HasNames() || p.Tunnels() {
		t.Errorf("rules alone: transforms %v proxied %v names %v tunnels %v", p.HasTransforms(), p.Proxied(), p.HasNames(), p.Tunnels())
	}
	if p.AllowsName("api.example.com") {
		t.Errorf("a rule granted access by name")
	}
	for host, key := range map[string]string{
		"api.example.com":   "api.example.com", // exact beats the wildcards
		"API.EXAMPLE.COM.":  "api.example.com",
		"x.example.com":     "*.example.com",
		"x.y.example.com":   "*.example.com",   // any depth
		"b.a.example.com":   "*.a.example.com", // the longest wildcard
		"a.example.com":     "*.example.com",   // a wildcard is not its apex
		"example.com":       "",
		"plain.test":        "", // listed without a transform
		"badexample.com":    "",
		"x.api.example.com": "*.example.com",
	} {
		got, _, ok := p.TransformFor(host)
		if got != key || ok != (key != "") {
			t.Errorf("TransformFor(%q) = %q %v, want %q", host, got, ok, key)
		}
	}
}

func TestCompileRulesRefuses(t *testing.T) {
	many := map[string][]Rule{}
	for i := 0; i <= MaxRuleDomains; i++ {
		many[fmt.Sprintf("h%d.test", i)] = nil
	}
	long := strings.Repeat("v", MaxHeaderValueLen+1)
	tests := []struct {
		name  string
		rules map[string][]Rule
		say   string
	}{
		{"bare star", map[string][]Rule{"*": nil}, `rules "*" is not a host name`},
		{"star in the middle", map[string][]Rule{"a.*.test": nil}, "not a host name"},
		{"address key", map[string][]Rule{"198.51.100.7": nil}, "not addresses"},
		{"duplicate key by case", map[string][]Rule{"A.test": nil, "a.test": nil}, "listed twice"},
		{"header name", map[string][]Rule{"a.test": {{Transform: headers("Bad Name", "x")}}}, `"Bad Name"]: not a valid header name`},
		{"CR LF in a value", map[string][]Rule{"a.test": {{Transform: headers("X-A", "a\r\nX-B: b")}}}, "without CR, LF"},
		{"NUL in a value", map[string][]Rule{"a.test": {{Transform: headers("X-A", "a\x00")}}}, "without CR, LF"},
		{"long value", map[string][]Rule{"a.test": {{Transform: headers("X-A", long)}}}, "at most"},
		{"Host", map[string][]Rule{"a.test": {{Transform: headers("host", "evil.test")}}}, "may not set Host"},
		{"Content-Length", map[string][]Rule{"a.test": {{Transform: headers("Content-Length", "1")}}}, "may not set Content-Length"},
		{"Transfer-Encoding", map[string][]Rule{"a.test": {{Transform: headers("transfer-encoding", "chunked")}}}, "may not set"},
		{"Connection", map[string][]Rule{"a.test": {{Transform: headers("Connection", "close")}}}, "may not set"},
		{"duplicate header by case", map[string][]Rule{"a.test": {{Transform: headers("X-A", "1", "x-a", "2")}}}, "listed twice"},
		{"too many domains", many, fmt.Sprintf("the limit is %d", MaxRuleDomains)},
		{"too many rules", map[string][]Rule{"a.test": make([]Rule, MaxRulesPerDomain+1)}, fmt.Sprintf("the limit is %d", MaxRulesPerDomain)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := Compile(Rules{Rules: tt.rules}, true, nil)
			if err == nil || !errdefs.IsInvalidArgument(err) || !strings.Contains(err.Error(), tt.say) {
				t.Fatalf("Compile = %v, want an invalid-argument error saying %q", err, tt.say)
			}
		})
	}
}

func TestEgressProxy(t *testing.T) {
	good := []struct{ in, want string }{
		{"proxy.example.com:1080", "proxy.example.com:1080"},
		{"Proxy.Example.com.:1080", "proxy.example.com:1080"},
		{"198.51.100.9:1080", "198.51.100.9:1080"},
	}
	for _, g := range good {
		norm, p, err := Compile(Rules{EgressProxy: &EgressProxy{Address: g.in, Username: "u", Password: "p"}}, true, nil)
		if err != nil {
			t.Fatalf("%s: %v", g.in, err)
		}
		if norm.EgressProxy.Address != g.want || p.Proxy.Address != g.want || p.Proxy.Password != "p" || !p.Tunnels() {
			t.Errorf("%s: rules %+v policy %+v", g.in, norm.EgressProxy, p.Proxy)
		}
		if r := p.Proxy.Redacted(); r.Password != "" || r.Username != "u" || r.Address != g.want {
			t.Errorf("Redacted = %+v", r)
		}
	}
	long := strings.Repeat("x", MaxProxyCredential+1)
	bad := []struct {
		p   EgressProxy
		say string
	}{
		{EgressProxy{Address: "proxy.example.com"}, "not host:port"},
		{EgressProxy{Address: "proxy.example.com:0"}, "port must be"},
		{EgressProxy{Address: "proxy.example.com:99999"}, "port must be"},
		{EgressProxy{Address: "10.1.2.3:1080"}, "never connects to"},
		{EgressProxy{Address: "127.0.0.1:1080"}, "never connects to"},
		{EgressProxy{Address: "169.254.169.254:1080"}, "never connects to"},
		{EgressProxy{Address: "[2001:db8::1]:1080"}, "only IPv4"},
		{EgressProxy{Address: "bad host:1080"}, "neither an IPv4 address nor a host name"},
		{EgressProxy{Address: "p.test:1080", Password: "x"}, "a password needs a username"},
		{EgressProxy{Address: "p.test:1080", Username: long}, "at most 255 bytes"},
		{EgressProxy{Address: "p.test:1080", Username: "u", Password: long}, "at most 255 bytes"},
	}
	for _, b := range bad {
		_, _, err := Compile(Rules{EgressProxy: &b.p}, true, nil)
		if err == nil || !errdefs.IsInvalidArgument(err) || !strings.Contains(err.Error(), b.say) {
			t.Errorf("egressProxy %+v: %v, want %q", b.p, err, b.say)
		}
	}
	if _, _, err := Compile(Rules{EgressProxy: &EgressProxy{Address: "10.1.2.3:1080"}}, true, pfxs("10.1.0.0/16")); err != nil {
		t.Errorf("a proxy in an opened range: %v", err)
	}
}

func TestInbound(t *testing.T) {
	in, err := CheckInbound(Inbound{MaskRequestHost: "${PORT}-app.example.com", HTTPSPorts: []int{8443, 3000, 8443}}, 49983)
	if err != nil {
		t.Fatal(err)
	}
	if in.Host(3000) != "3000-app.example.com" || !in.IsHTTPS(3000) || in.IsHTTPS(80) || !reflect.DeepEqual(in.HTTPSPorts, []int{3000, 8443}) {
		t.Errorf("inbound = %+v host %q", in, in.Host(3000))
	}
	if (Inbound{}).Host(80) != "" {
		t.Errorf("no mask must keep the client's Host")
	}
	for _, b := range []struct {
		in  Inbound
		say string
	}{
		{Inbound{HTTPSPorts: []int{49983}}, "envd port 49983 cannot be listed"},
		{Inbound{HTTPSPorts: []int{0}}, "not a port"},
		{Inbound{HTTPSPorts: []int{70000}}, "not a port"},
		{Inbound{MaskRequestHost: "a b.example.com"}, "not a valid Host"},
		{Inbound{MaskRequestHost: "x.example.com\r\nX-Evil: 1"}, "not a valid Host"},
	} {
		if _, err := CheckInbound(b.in, 49983); err == nil || !errdefs.IsInvalidArgument(err) || !strings.Contains(err.Error(), b.say) {
			t.Errorf("CheckInbound(%+v) = %v, want %q", b.in, err, b.say)
		}
	}
}
