package sandbox

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/netpolicy"
)

// TestNetworkRulesAndProxy: E2B's rules and egressProxy reach the runtime
// and the record, the daemon's CheckNetwork hook vets them before
// anything changes, and a snapshot hands them and the data-plane settings
// on; the egress CA goes to every agent in /init.
func TestNetworkRulesAndProxy(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	var mu sync.Mutex
	var bodies []string
	e.rt.Handler = func(id string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/init" {
				b, _ := io.ReadAll(r.Body)
				mu.Lock()
				bodies = append(bodies, string(b))
				mu.Unlock()
			}
			w.WriteHeader(http.StatusNoContent)
		})
	}
	var checked []string
	m, err := New(Config{
		Runtime: e.rt, Store: e.st, ImageDir: t.TempDir(), AgentWait: 2 * time.Second, AgentArgs: []string{"/agent"},
		Logger:   slog.New(slog.NewTextHandler(testLogOut, nil)),
		EgressCA: []byte("-----BEGIN CERTIFICATE-----\nEGRESS\n-----END CERTIFICATE-----\n"),
		CheckNetwork: func(ctx context.Context, r netpolicy.Rules) error {
			if r.EgressProxy == nil {
				return nil
			}
			checked = append(checked, r.EgressProxy.Address)
			if strings.HasPrefix(r.EgressProxy.Address, "nowhere.") {
				return errors.New("does not resolve: " + errdefs.ErrInvalidArgument.Error())
			}
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	e.m = m
	rules := &netpolicy.Rules{AllowOut: []string{"api.example.com"}, DenyOut: []string{"0.0.0.0/0"},
		Rules:       map[string][]netpolicy.Rule{"API.example.com": {{Transform: &netpolicy.Transform{Headers: map[string]string{"Authorization": "Bearer x"}}}}},
		EgressProxy: &netpolicy.EgressProxy{Address: "proxy.example.com:1080", Username: "u", Password: "p"}}
	sb := e.create(t, CreateRequest{Network: rules, Inbound: &netpolicy.Inbound{MaskRequestHost: "${PORT}-x.example.com", HTTPSPorts: []int{8443}}, PrivateTraffic: true})
	p := e.egressOf(t, sb.ID)
	if _, hs, ok := p.TransformFor("api.example.com"); !ok || hs[0].Value != "Bearer x" || p.Proxy == nil || p.Proxy.Password != "p" {
		t.Errorf("runtime policy %+v", p)
	}
	if _, ok := sb.Network.Rules["api.example.com"]; !ok || sb.Inbound.Host(80) != "80-x.example.com" || !sb.Inbound.IsHTTPS(8443) {
		t.Errorf("sandbox %+v inbound %+v", sb.Network, sb.Inbound)
	}
	mu.Lock()
	if len(bodies) == 0 || !strings.Contains(bodies[len(bodies)-1], `"egressCA":"-----BEGIN CERTIFICATE-----\nEGRESS`) {
		t.Errorf("/init bodies %q lack the egress CA", bodies)
	}
	mu.Unlock()

	snap, err := e.m.Snapshot(ctx, sb.ID, SnapshotOptions{})
	if err != nil {
		t.Fatal(err)
	}
	child := e.create(t, CreateRequest{TemplateID: snap.ID})
	if child.Network == nil || child.Network.EgressProxy == nil || child.Inbound.Host(1) != "1-x.example.com" || !child.PrivateTraffic || child.TrafficAccessToken == "" {
		t.Errorf("created from the snapshot: network %+v inbound %+v private %v", child.Network, child.Inbound, child.PrivateTraffic)
	}
	own := e.create(t, CreateRequest{TemplateID: snap.ID, Inbound: &netpolicy.Inbound{}})
	if !own.Inbound.IsZero() || own.PrivateTraffic {
		t.Errorf("a create stating its own data-plane settings inherited: %+v %v", own.Inbound, own.PrivateTraffic)
	}

	bad := *rules
	bad.EgressProxy = &netpolicy.EgressProxy{Address: "nowhere.example.com:1080"}
	if _, err := e.m.SetNetwork(ctx, sb.ID, NetworkRequest{Rules: &bad}); err == nil {
		t.Errorf("the hook's refusal was ignored")
	}
	if got := e.egressOf(t, sb.ID); got.Proxy == nil || got.Proxy.Address != "proxy.example.com:1080" {
		t.Errorf("a refused update changed the runtime: %+v", got.Proxy)
	}
	if _, err := e.m.SetNetwork(ctx, sb.ID, NetworkRequest{}); err != nil {
		t.Fatal(err)
	}
	if got := e.egressOf(t, sb.ID); got.Proxy != nil || got.HasTransforms() {
		t.Errorf("clearing left %+v", got)
	}
	if got, _ := e.m.Get(ctx, sb.ID); got.Inbound.Host(1) != "1-x.example.com" || !got.PrivateTraffic {
		t.Errorf("PUT /network must not touch the data-plane settings: %+v", got.Inbound)
	}
	if _, err := e.m.Create(ctx, CreateRequest{TemplateID: "base", Inbound: &netpolicy.Inbound{HTTPSPorts: []int{49983}}}); !errdefs.IsInvalidArgument(err) {
		t.Errorf("the envd port in httpsPorts: %v", err)
	}
	if len(checked) < 3 {
		t.Errorf("CheckNetwork saw %v", checked)
	}
}
