package cli

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/forkbox/forkbox/client"
	"github.com/forkbox/forkbox/client/clienttest"
	"github.com/forkbox/forkbox/internal/netpolicy"
)

type networkOut struct {
	SandboxID     string         `json:"sandboxID"`
	AllowInternet bool           `json:"allowInternetAccess"`
	AllowOut      []string       `json:"allowOut"`
	DenyOut       []string       `json:"denyOut"`
	Denials       client.Denials `json:"denials"`
}

func TestSandboxNetwork(t *testing.T) {
	srv := clienttest.NewServer(t)
	id := mustJSON[client.Sandbox](t, srv, "sandbox", "create", "--template", "base").SandboxID
	got := mustJSON[networkOut](t, srv, "sandbox", "network", id)
	if !got.AllowInternet || len(got.AllowOut)+len(got.DenyOut) != 0 {
		t.Fatalf("fresh sandbox network %+v", got)
	}
	got = mustJSON[networkOut](t, srv, "sandbox", "network", id,
		"--deny-out", "0.0.0.0/0", "--allow-out", "api.example.com,198.51.100.0/24", "--internet=false")
	want := networkOut{SandboxID: id, AllowOut: []string{"api.example.com", "198.51.100.0/24"}, DenyOut: []string{"0.0.0.0/0"},
		Denials: client.Denials{ByReason: map[string]uint64{}, Recent: []client.Denial{}}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("after set: %+v, want %+v", got, want)
	}
	at := time.Date(2026, 12, 2, 5, 0, 0, 0, time.UTC)
	srv.Denials.Proxy(id, netpolicy.Denial{Time: at, Layer: netpolicy.LayerProxy, Destination: "198.51.100.9:443",
		Name: "no.example", Reason: netpolicy.ReasonName, Rule: "name no.example not in allowOut"})
	srv.Denials.Kernel([]netpolicy.KernelCount{{ID: id, Reason: netpolicy.ReasonDenyOut, Packets: 3, Recent: []netpolicy.Denial{
		{Time: at, Layer: netpolicy.LayerKernel, Destination: "198.51.100.10", Reason: netpolicy.ReasonDenyOut, Rule: "denyOut 0.0.0.0/0"}}}})
	r := runCLI(t, srv, nil, "sandbox", "network", id)
	for _, s := range []string{"api.example.com, 198.51.100.0/24", "no (0.0.0.0/0 denied)", "4 (denyOut 3, name 1)", "no.example", "denyOut 0.0.0.0/0"} {
		if r.code != 0 || !strings.Contains(r.stdout, s) {
			t.Errorf("human output lacks %q: %q %q", s, r.stdout, r.stderr)
		}
	}
	if d := mustJSON[networkOut](t, srv, "sandbox", "network", id).Denials; d.Total != 4 || len(d.Recent) != 2 || d.Recent[1].Name != "no.example" && d.Recent[0].Name != "no.example" {
		t.Errorf("JSON denials %+v", d)
	}
	got = mustJSON[networkOut](t, srv, "sandbox", "network", id, "--clear")
	if !got.AllowInternet || len(got.AllowOut)+len(got.DenyOut) != 0 {
		t.Errorf("after --clear: %+v", got)
	}
	if r := runCLI(t, srv, nil, "sandbox", "network", id, "--deny-out", "example.com"); r.code == 0 || !strings.Contains(r.stderr, "only valid in allowOut") {
		t.Errorf("bad rule: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := runCLI(t, srv, nil, "sandbox", "network", id, "--clear", "--internet=false"); r.code == 0 {
		t.Errorf("--clear with a rule accepted")
	}
}

type networkRulesOut struct {
	Rules       map[string][]client.NetworkRule `json:"rules"`
	EgressProxy *client.EgressProxy             `json:"egressProxy"`
}

// TestSandboxNetworkRules: --rule and --egress-proxy set E2B's rules and
// proxy; the output names domains, header names and the proxy, never a
// header value or the password.
func TestSandboxNetworkRules(t *testing.T) {
	srv := clienttest.NewServer(t)
	id := mustJSON[client.Sandbox](t, srv, "sandbox", "create", "--template", "base").SandboxID
	t.Setenv("FORKBOX_EGRESS_PROXY_PASSWORD", "pw-from-env")
	args := []string{"sandbox", "network", id, "--allow-out", "api.example.com",
		"--rule", "api.example.com=Authorization:Bearer s3cret", "--rule", "api.example.com=X-Team:blue",
		"--rule", "*.example.org=X-Org:1", "--egress-proxy", "proxy.example.com:1080", "--egress-proxy-user", "me"}
	r := runCLI(t, srv, nil, args...)
	for _, s := range []string{"api.example.com: Authorization, X-Team", "*.example.org: X-Org", "me@proxy.example.com:1080"} {
		if r.code != 0 || !strings.Contains(r.stdout, s) {
			t.Errorf("human output lacks %q: %q %q", s, r.stdout, r.stderr)
		}
	}
	info, err := client.New(srv.URL, clienttest.APIKey).GetSandbox(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if h := info.Network.Rules["api.example.com"][0].Transform.Headers; h["Authorization"] != "Bearer s3cret" || h["X-Team"] != "blue" ||
		info.Network.EgressProxy.Username != "me" || info.Network.EgressProxy.Password != "" {
		t.Errorf("GetSandbox network %+v", info.Network)
	}
	js := runCLI(t, srv, nil, "sandbox", "network", id, "--json")
	if strings.Contains(js.stdout+r.stdout, "s3cret") || strings.Contains(js.stdout+r.stdout, "pw-from-env") {
		t.Errorf("a secret in the output: %s %s", r.stdout, js.stdout)
	}
	got := mustJSON[networkRulesOut](t, srv, "sandbox", "network", id)
	if got.EgressProxy == nil || got.EgressProxy.Address != "proxy.example.com:1080" || len(got.Rules) != 2 {
		t.Errorf("JSON %+v", got)
	}
	if r := runCLI(t, srv, nil, "sandbox", "network", id, "--rule", "nodomain"); r.code == 0 || !strings.Contains(r.stderr, "DOMAIN=NAME:VALUE") {
		t.Errorf("bad --rule: %d %q", r.code, r.stderr)
	}
	if r := runCLI(t, srv, nil, "sandbox", "network", id, "--rule", "a.test=Host:b.test"); r.code == 0 || !strings.Contains(r.stderr, "may not set Host") {
		t.Errorf("--rule Host: %d %q", r.code, r.stderr)
	}
	if got := mustJSON[networkRulesOut](t, srv, "sandbox", "network", id, "--allow-out", "api.example.com"); len(got.Rules) != 0 || got.EgressProxy != nil {
		t.Errorf("a set without --rule and --egress-proxy kept them: %+v", got)
	}
}
