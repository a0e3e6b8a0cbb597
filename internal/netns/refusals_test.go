package netns

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/forkbox/forkbox/internal/netpolicy"
)

// TestRefusalsCountedPerSandbox: a connection a sandbox's denyOut refuses
// and one to the metadata address (the guard) are counted under their own
// reasons, for that sandbox only, with the destination sampled and named
// by its rule; a policy change keeps the counts; a released network
// leaves no counter or set behind.
func TestRefusalsCountedPerSandbox(t *testing.T) {
	ctx := context.Background()
	out := setupOutside(t)
	const port = 8080
	listenOutside(t, out, outAddrs[0], port)
	m := newTestManager(t)
	a, err := m.Allocate(ctx, "rfa", true)
	if err != nil {
		t.Fatal(err)
	}
	b, err := m.Allocate(ctx, "rfb", true)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.SetPolicy(ctx, a.ID, compile(t, netpolicy.Rules{DenyOut: []string{"198.51.100.0/28"}}, true)); err != nil {
		t.Fatal(err)
	}
	if reach(t, a.NSPath, fmt.Sprintf("%s:%d", outAddrs[0], port)) {
		t.Fatal("denied address reached")
	}
	if reach(t, a.NSPath, fmt.Sprintf("%s:%d", metadataIP, port)) {
		t.Fatal("metadata address reached")
	}
	got := refusalsOf(t, m)
	checkRefused(t, got[a.ID+"/"+netpolicy.ReasonDenyOut], outAddrs[0], "denyOut 198.51.100.0/28")
	checkRefused(t, got[a.ID+"/"+netpolicy.ReasonForbidden], metadataIP, "forbidden range 169.254.0.0/16")
	for _, r := range []string{netpolicy.ReasonDenyOut, netpolicy.ReasonForbidden} {
		if kc := got[b.ID+"/"+r]; kc.Packets != 0 || len(kc.Recent) != 0 {
			t.Errorf("the other sandbox has %s refusals: %+v", r, kc)
		}
	}
	before := got[a.ID+"/"+netpolicy.ReasonDenyOut].Packets
	if err := m.SetPolicy(ctx, a.ID, compile(t, netpolicy.Rules{}, true)); err != nil {
		t.Fatal(err)
	}
	if after := refusalsOf(t, m)[a.ID+"/"+netpolicy.ReasonDenyOut].Packets; after != before {
		t.Errorf("a policy change reset the count: %d → %d", before, after)
	}
	if err := m.Release(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	if _, ok := refusalsOf(t, m)[a.ID+"/"+netpolicy.ReasonDenyOut]; ok {
		t.Error("released network still reported")
	}
	if out := nftList(t, m.cfg.Table); containsAny(out, []string{"refuse" + fmt.Sprint(a.Slot) + " ", "set rx" + fmt.Sprint(a.Slot) + " ", "counter x" + fmt.Sprint(a.Slot) + " "}) {
		t.Errorf("released network left refusal objects:\n%s", out)
	}
}

func refusalsOf(t *testing.T, m *Manager) map[string]netpolicy.KernelCount {
	t.Helper()
	kcs, err := m.Refusals()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]netpolicy.KernelCount{}
	for _, kc := range kcs {
		out[kc.ID+"/"+kc.Reason] = kc
	}
	return out
}

func checkRefused(t *testing.T, kc netpolicy.KernelCount, dst, rule string) {
	t.Helper()
	if kc.Packets == 0 {
		t.Errorf("%s %s: no packets counted", kc.ID, kc.Reason)
	}
	if len(kc.Recent) != 1 || kc.Recent[0].Destination != dst || kc.Recent[0].Rule != rule || kc.Recent[0].Layer != netpolicy.LayerKernel {
		t.Errorf("%s %s: sampled %+v, want one %s by %q", kc.ID, kc.Reason, kc.Recent, dst, rule)
	}
}

// nftList is `nft list table inet <table>`.
func nftList(t *testing.T, table string) string {
	t.Helper()
	out, err := exec.Command("nft", "list", "table", "inet", table).CombinedOutput()
	if err != nil {
		t.Fatalf("nft list: %v\n%s", err, out)
	}
	return string(out)
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}
