package sandbox

import (
	"context"
	"net/netip"
	"reflect"
	"testing"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/netpolicy"
)

// egressOf returns the policy the fake runtime enforces on id.
func (e *env) egressOf(t *testing.T, id string) *netpolicy.Policy {
	t.Helper()
	p, ok := e.rt.Egress(id)
	if !ok {
		t.Fatalf("sandbox %s not in the runtime", id)
	}
	return p
}

func denies(p *netpolicy.Policy, addr string) bool {
	return p != nil && !p.AllowsAddr(netip.MustParseAddr(addr), nil)
}

// TestNetworkRulesFollowTheSandbox checks that rules reach the runtime at
// create, change in place, and survive pause/resume, clone, snapshot →
// create (unless the create states its own) and rollback.
func TestNetworkRulesFollowTheSandbox(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	rules := &netpolicy.Rules{AllowOut: []string{"198.51.100.8"}, DenyOut: []string{"198.51.100.0/24"}}
	sb := e.create(t, CreateRequest{Network: rules})
	if sb.Network == nil || !reflect.DeepEqual(sb.Network.DenyOut, []string{"198.51.100.0/24"}) || !sb.AllowInternet {
		t.Fatalf("created with network %+v internet %v", sb.Network, sb.AllowInternet)
	}
	check := func(id, what string, wantDenied7 bool) {
		t.Helper()
		p := e.egressOf(t, id)
		if got := denies(p, "198.51.100.7"); got != wantDenied7 {
			t.Errorf("%s: 198.51.100.7 denied = %v, want %v (policy %+v)", what, got, wantDenied7, p)
		}
		if denies(p, "198.51.100.8") {
			t.Errorf("%s: the allowed 198.51.100.8 is denied", what)
		}
	}
	check(sb.ID, "create", true)

	snap, err := e.m.Snapshot(ctx, sb.ID, SnapshotOptions{})
	if err != nil {
		t.Fatal(err)
	}
	inherited := e.create(t, CreateRequest{TemplateID: snap.ID})
	check(inherited.ID, "create from snapshot", true)
	own := e.create(t, CreateRequest{TemplateID: snap.ID, Network: &netpolicy.Rules{DenyOut: []string{"203.0.113.0/24"}}})
	check(own.ID, "create from snapshot with its own rules", false)

	res, err := e.m.Clone(ctx, sb.ID, CloneOptions{Count: 1})
	if err != nil || res.Sandboxes[0] == nil {
		t.Fatalf("clone: %v %+v", err, res)
	}
	check(res.Sandboxes[0].ID, "clone", true)

	// Loosen in place: the deny goes.
	if _, err := e.m.SetNetwork(ctx, sb.ID, NetworkRequest{Rules: &netpolicy.Rules{DenyOut: []string{"203.0.113.0/24"}}}); err != nil {
		t.Fatal(err)
	}
	check(sb.ID, "after SetNetwork", false)

	// Tighten while paused: applied at resume.
	if err := e.m.Pause(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	e.waitState(t, sb.ID, StatePaused)
	f := false
	if _, err := e.m.SetNetwork(ctx, sb.ID, NetworkRequest{AllowInternet: &f, Rules: &netpolicy.Rules{AllowOut: []string{"198.51.100.8"}}}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.m.Connect(ctx, sb.ID, 0); err != nil {
		t.Fatal(err)
	}
	check(sb.ID, "resume", true)
	if !denies(e.egressOf(t, sb.ID), "203.0.113.1") {
		t.Errorf("allow_internet_access false not enforced after resume")
	}

	if _, err := e.m.Rollback(ctx, sb.ID, snap.ID); err != nil {
		t.Fatal(err)
	}
	check(sb.ID, "rollback keeps the sandbox's current rules", true)
	if !denies(e.egressOf(t, sb.ID), "203.0.113.1") {
		t.Errorf("rollback dropped allow_internet_access false")
	}
}

// TestSetNetworkRefusesWhole checks a bad rule set changes nothing.
func TestSetNetworkRefusesWhole(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	sb := e.create(t, CreateRequest{Network: &netpolicy.Rules{DenyOut: []string{"198.51.100.7"}}})
	before := e.egressOf(t, sb.ID)
	bad := NetworkRequest{Rules: &netpolicy.Rules{DenyOut: []string{"198.51.100.9", "example.com"}}}
	if _, err := e.m.SetNetwork(ctx, sb.ID, bad); !errdefs.IsInvalidArgument(err) {
		t.Fatalf("SetNetwork(bad) = %v, want invalid argument", err)
	}
	got, _ := e.m.Get(ctx, sb.ID)
	if !reflect.DeepEqual(got.Network.DenyOut, []string{"198.51.100.7/32"}) || !reflect.DeepEqual(e.egressOf(t, sb.ID), before) {
		t.Fatalf("a refused rule set changed the sandbox: %+v", got.Network)
	}
	if _, err := e.m.Create(ctx, CreateRequest{TemplateID: "base", Network: &netpolicy.Rules{AllowOut: []string{"169.254.169.254"}}}); !errdefs.IsInvalidArgument(err) {
		t.Fatalf("create allowing the metadata address = %v, want invalid argument", err)
	}
	if _, err := e.m.SetNetwork(ctx, "nosuchsandbox", NetworkRequest{}); !errdefs.IsNotFound(err) {
		t.Fatalf("SetNetwork(unknown) = %v", err)
	}
}
