package server

import (
	"fmt"
	"net/http"
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/forkbox/forkbox/internal/netpolicy"
)

func TestNetworkAPI(t *testing.T) {
	e := newEnv(t)
	sb := e.create(map[string]any{
		"templateID": "base",
		"network":    map[string]any{"allowOut": []string{"API.example.com", "198.51.100.8"}, "denyOut": []string{"0.0.0.0/0"}},
	})
	id := sb["sandboxID"].(string)
	_, data := e.call("GET", "/sandboxes/"+id, nil)
	d := decodeObject(t, data)
	net, _ := d["network"].(map[string]any)
	if fmt.Sprint(net["allowOut"]) != "[api.example.com 198.51.100.8/32]" || fmt.Sprint(net["denyOut"]) != "[0.0.0.0/0]" || d["allowInternetAccess"] != true {
		t.Fatalf("detail network = %v, allowInternetAccess = %v", d["network"], d["allowInternetAccess"])
	}

	resp, data := e.call("PUT", "/sandboxes/"+id+"/network", map[string]any{"denyOut": []string{"198.51.100.7"}, "allow_internet_access": false})
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("PUT network: %d %s", resp.StatusCode, data)
	}
	p, ok := e.rt.Egress(id)
	if !ok || p == nil {
		t.Fatalf("PUT did not reach the runtime")
	}
	want := netpolicy.Policy{Deny: pfx("0.0.0.0/0")}
	if !reflect.DeepEqual(*p, want) {
		t.Errorf("runtime policy = %+v, want %+v (allowOut cleared, internet off)", p, want)
	}
	_, data = e.call("GET", "/sandboxes/"+id, nil)
	d = decodeObject(t, data)
	if net, _ := d["network"].(map[string]any); net["allowOut"] != nil || fmt.Sprint(net["denyOut"]) != "[198.51.100.7/32]" || d["allowInternetAccess"] != false {
		t.Errorf("after PUT: network %v allowInternetAccess %v", d["network"], d["allowInternetAccess"])
	}

	for _, tc := range []struct {
		body map[string]any
		say  string
	}{
		{map[string]any{"denyOut": []string{"example.com"}}, "only valid in allowOut"},
		{map[string]any{"allowOut": []string{"10.0.0.0/8"}}, "never reach"},
		{map[string]any{"denyOut": []string{"198.51.100.0/40"}}, "not an IP address or CIDR"},
		{map[string]any{"denyOut": make([]string, netpolicy.MaxEntries+1)}, fmt.Sprintf("limit is %d", netpolicy.MaxEntries)},
	} {
		resp, data := e.call("PUT", "/sandboxes/"+id+"/network", tc.body)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(data), tc.say) {
			t.Errorf("PUT %v: %d %s, want 400 saying %q", tc.body, resp.StatusCode, data, tc.say)
		}
	}
	_, data = e.call("GET", "/sandboxes/"+id, nil)
	if net, _ := decodeObject(t, data)["network"].(map[string]any); fmt.Sprint(net["denyOut"]) != "[198.51.100.7/32]" {
		t.Errorf("a refused PUT changed the rules: %v", net)
	}
	if resp, _ := e.call("PUT", "/sandboxes/nosuchsandbox0000000/network", map[string]any{}); resp.StatusCode != http.StatusNotFound {
		t.Errorf("PUT on an unknown sandbox: %d", resp.StatusCode)
	}
	resp, data = e.call("POST", "/sandboxes", map[string]any{"templateID": "base", "network": map[string]any{"allowOut": []string{"169.254.169.254"}}})
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("create allowing the metadata address: %d %s", resp.StatusCode, data)
	}
}

func pfx(s ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, p := range s {
		out = append(out, netip.MustParsePrefix(p))
	}
	return out
}
