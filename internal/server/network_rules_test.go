package server

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestNetworkRulesAPI: E2B's rules and egressProxy at create and PUT,
// reported by GET /sandboxes/{id} with the header values but never the
// proxy's password, and by the network status without either; the data
// plane's maskRequestHost, httpsPorts and allowPublicTraffic.
func TestNetworkRulesAPI(t *testing.T) {
	e := newEnv(t)
	sb := e.create(map[string]any{"templateID": "base", "network": map[string]any{
		"allowOut":           []string{"api.example.com"},
		"denyOut":            []string{"0.0.0.0/0"},
		"rules":              map[string]any{"API.Example.com": []any{map[string]any{"transform": map[string]any{"headers": map[string]string{"Authorization": "Bearer s3cret"}}}}},
		"egressProxy":        map[string]any{"address": "198.51.100.9:1080", "username": "u", "password": "pr0xy-pass"},
		"maskRequestHost":    "${PORT}-masked.example.com",
		"allowPublicTraffic": false,
	}})
	id := sb["sandboxID"].(string)
	tok, _ := sb["trafficAccessToken"].(string)
	_, data := e.call("GET", "/sandboxes/"+id, nil)
	var d struct {
		Network networkJSON `json:"network"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatal(err)
	}
	n := d.Network
	if n.Rules["api.example.com"][0].Transform.Headers["Authorization"] != "Bearer s3cret" || n.EgressProxy == nil ||
		n.EgressProxy.Address != "198.51.100.9:1080" || n.EgressProxy.Username != "u" || n.MaskRequestHost != "${PORT}-masked.example.com" ||
		n.AllowPublicTraffic == nil || *n.AllowPublicTraffic || tok == "" {
		t.Errorf("GET network = %s", data)
	}
	if strings.Contains(string(data), "pr0xy-pass") {
		t.Errorf("GET returned the proxy's password: %s", data)
	}
	_, status := e.call("GET", "/sandboxes/"+id+"/network", nil)
	if strings.Contains(string(status), "s3cret") || strings.Contains(string(status), "pr0xy-pass") || !strings.Contains(string(status), `"Authorization":"[redacted]"`) {
		t.Errorf("network status = %s", status)
	}

	// The data plane: the token is needed, the Host is the mask.
	route := []string{"E2b-Sandbox-Id", id, "E2b-Sandbox-Port", "8080"}
	if resp, _ := e.call("GET", "/", nil, route...); resp.StatusCode != http.StatusForbidden {
		t.Errorf("no traffic token: %d, want 403", resp.StatusCode)
	}
	resp, body := e.call("GET", "/", nil, append(route, TrafficTokenHeader, tok)...)
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"host":"8080-masked.example.com"`) {
		t.Errorf("masked GET: %d %s", resp.StatusCode, body)
	}
	resp, body = e.call("POST", "/", "x", append(route, TrafficTokenHeader, tok)...)
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"host":"8080-masked.example.com"`) {
		t.Errorf("masked POST: %d %s", resp.StatusCode, body)
	}

	// PUT replaces the egress rules whole and leaves the data plane's.
	if resp, data := e.call("PUT", "/sandboxes/"+id+"/network", map[string]any{"denyOut": []string{"198.51.100.7"}}); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("PUT: %d %s", resp.StatusCode, data)
	}
	_, data = e.call("GET", "/sandboxes/"+id, nil)
	if strings.Contains(string(data), "egressProxy") || strings.Contains(string(data), `"rules"`) || !strings.Contains(string(data), `"maskRequestHost":"${PORT}-masked.example.com"`) {
		t.Errorf("after PUT: %s", data)
	}

	// httpsPorts: the proxy speaks TLS to the port (here a plain server,
	// so it fails); the envd port cannot be listed.
	tls := e.create(map[string]any{"templateID": "base", "network": map[string]any{"httpsPorts": []int{8080}}})
	if resp, _ := e.call("GET", "/", nil, "E2b-Sandbox-Id", tls["sandboxID"].(string), "E2b-Sandbox-Port", "8080"); resp.StatusCode != http.StatusBadGateway {
		t.Errorf("TLS to a plain port: %d, want 502", resp.StatusCode)
	}
	for body, say := range map[string]string{
		`{"templateID":"base","network":{"httpsPorts":[49983]}}`:                                             "envd port 49983",
		`{"templateID":"base","network":{"rules":{"*":[]}}}`:                                                 `rules \"*\"`,
		`{"templateID":"base","network":{"rules":{"a.test":[{"transform":{"headers":{"Host":"b.test"}}}]}}}`: "may not set Host",
		`{"templateID":"base","network":{"egressProxy":{"address":"10.0.0.1:1080"}}}`:                        "egressProxy",
		`{"templateID":"base","network":{"egressProxy":{"address":"p.example.com:1080","password":"x"}}}`:    "needs a username",
		`{"templateID":"base","network":{"maskRequestHost":"a b"}}`:                                          "maskRequestHost",
	} {
		resp, data := e.call("POST", "/sandboxes", body)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(data), say) {
			t.Errorf("create %s: %d %s, want 400 saying %q", body, resp.StatusCode, data, say)
		}
	}
}
