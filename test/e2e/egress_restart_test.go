package e2e

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/forkbox/forkbox/client"
	"github.com/forkbox/forkbox/internal/daemon/daemontest"
)

// restartCase is a command run in one of the restart test's sandboxes and
// what it must print ("" = it must not reach any server).
type restartCase struct {
	sb   *client.Sandbox
	cmd  string
	want string
}

// TestEgressRulesSurviveRestart: rules set with the Go SDK (at create and
// by UpdateNetwork) are still enforced after the daemon is killed and
// started again, and the domain rules' proxy serves again: address rules,
// a domain allow-list, and a header rule with the traffic tunnelled
// through the SOCKS5 server; the last also after a rollback.
func TestEgressRulesSurviveRestart(t *testing.T) {
	setupEgressOutside(t)
	seen, _, caPEM := startEgressWorld(t)
	d := startDaemon(t, "--egress-dns", startEgressDNS(t), "--egress-ca-file", writeCAFile(t, caPEM))
	ctx := daemontest.Context(t)
	c := client.New(d.URL, d.APIKey)
	create := func(n *client.NetworkRules) *client.Sandbox {
		t.Helper()
		sb, err := c.CreateSandbox(ctx, client.CreateOptions{TemplateID: "base", Timeout: 3 * time.Minute, Network: n})
		if err != nil {
			t.Fatalf("create: %v", err)
		}
		t.Cleanup(func() { c.KillSandbox(context.Background(), sb.SandboxID) })
		return sb
	}
	sb := create(&client.NetworkRules{DenyOut: []string{egrWebB}})
	named := create(nil)
	if err := c.UpdateNetwork(ctx, named.SandboxID, client.NetworkUpdate{
		DenyOut: []string{"0.0.0.0/0"}, AllowOut: []string{"allowed.egress.test"}}); err != nil {
		t.Fatalf("UpdateNetwork: %v", err)
	}
	header := "Bearer restart-" + fmt.Sprint(time.Now().UnixNano())
	ruled := create(&client.NetworkRules{AllowOut: []string{"allowed.egress.test"}, DenyOut: []string{"0.0.0.0/0"},
		Rules:       map[string][]client.NetworkRule{"allowed.egress.test": {{Transform: &client.NetworkTransform{Headers: map[string]string{"Authorization": header}}}}},
		EgressProxy: &client.EgressProxy{Address: fmt.Sprintf("socks.egress.test:%d", egrSocksPort), Username: egrSocksUser, Password: egrSocksPass}})
	resolve := "--resolve allowed.egress.test:443:" + egrWebA + " https://allowed.egress.test"
	cases := func(when string) []restartCase {
		return []restartCase{
			{sb, "curl -sS -m 4 http://" + egrWebA + "/", "A host=" + egrWebA},
			{sb, "curl -sS -m 4 http://" + egrWebB + "/", ""},
			{named, "curl -sS -m 4 -H 'Host: allowed.egress.test' http://" + egrWebB + "/", "A host=allowed.egress.test"},
			{named, "curl -sS -m 4 http://" + egrWebA + "/", ""},
			{ruled, "curl -sS -m 8 " + resolve + "/rec/" + when, "A host=allowed.egress.test"},
			{ruled, "curl -sS -m 4 http://" + egrWebB + "/", ""},
		}
	}
	check := func(when string) {
		t.Helper()
		before := len(seen.socksSeen())
		runCases(t, ctx, when, cases(when))
		if got := seen.header("A /rec/"+when, "Authorization"); got != header {
			t.Errorf("%s: the server saw Authorization %q, want the rule's", when, got)
		}
		if s := seen.socksSeen()[before:]; !slices.Contains(s, "name allowed.egress.test:443") {
			t.Errorf("%s: the SOCKS server saw %v, want the allowed name", when, s)
		}
	}
	check("before-restart")
	snap, err := c.Snapshot(ctx, ruled.SandboxID, "")
	if err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	// The hard case: the daemon dies (its proxy with it) and a new one,
	// on a new proxy port, takes over the running sandboxes.
	d.Kill9()
	d.Restart()
	c = client.New(d.URL, d.APIKey)
	for _, s := range []**client.Sandbox{&sb, &named, &ruled} {
		if *s, err = c.Connect(ctx, (*s).SandboxID, 0); err != nil {
			t.Fatalf("connect after restart: %v", err)
		}
	}
	check("after-restart")
	if _, err := c.Rollback(ctx, ruled.SandboxID, snap.SnapshotID); err != nil {
		t.Fatalf("rollback: %v", err)
	}
	if ruled, err = c.Connect(ctx, ruled.SandboxID, 0); err != nil {
		t.Fatal(err)
	}
	check("after-rollback")
	info, err := c.GetSandbox(ctx, named.SandboxID)
	if err != nil || info.Network == nil || len(info.Network.AllowOut) != 1 || info.Network.AllowOut[0] != "allowed.egress.test" {
		t.Errorf("rules reported after restart: %+v %v", info, err)
	}
	if info, err := c.GetSandbox(ctx, ruled.SandboxID); err != nil || info.Network.EgressProxy == nil || info.Network.EgressProxy.Password != "" {
		t.Errorf("proxy reported after restart: %+v %v", info.Network, err)
	}
}

func runCases(t *testing.T, ctx context.Context, when string, cases []restartCase) {
	t.Helper()
	for _, tc := range cases {
		var out strings.Builder
		code, err := tc.sb.Conn().Exec(ctx, client.ExecOptions{Shell: tc.cmd, Stdout: &out, Stderr: io.Discard})
		if err != nil {
			t.Fatalf("%s: exec %q: %v", when, tc.cmd, err)
		}
		got := out.String()
		if tc.want != "" && (code != 0 || got != tc.want) {
			t.Errorf("%s: %q = %d %q, want %q", when, tc.cmd, code, got, tc.want)
		}
		if tc.want == "" && (strings.HasPrefix(got, "A ") || strings.HasPrefix(got, "B ")) {
			t.Errorf("%s: %q reached a denied server: %q", when, tc.cmd, got)
		}
	}
}
