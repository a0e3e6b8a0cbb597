package cli

import (
	"strings"
	"testing"

	"github.com/forkbox/forkbox/client"
	"github.com/forkbox/forkbox/client/clienttest"
)

// TestSecretVerbs: create from stdin and from --value, list, info, update
// (version + 1), delete; no output ever holds a value; --iam-token at
// sandbox create.
func TestSecretVerbs(t *testing.T) {
	srv := clienttest.NewServer(t)
	r := runCLI(t, srv, strings.NewReader("from-stdin-value\n"), "secret", "create", "Gh-Token", "--metadata", "owner=ci", "--json")
	if r.code != 0 || !strings.Contains(r.stdout, `"name": "gh-token"`) || strings.Contains(r.stdout, "from-stdin-value") {
		t.Fatalf("create from stdin: %d %s %s", r.code, r.stdout, r.stderr)
	}
	s := mustJSON[client.Secret](t, srv, "secret", "create", "other", "--value", "flag-value")
	if s.CurrentVersion != 1 {
		t.Fatalf("created %+v", s)
	}
	if sent := string(srv.LastRequest().Body); !strings.Contains(sent, `"value":"flag-value"`) {
		t.Errorf("create body %s", sent)
	}
	up := mustJSON[client.Secret](t, srv, "secret", "update", "gh-token", "--value", "second-value")
	if up.CurrentVersion != 2 || up.Metadata["owner"] != "ci" {
		t.Errorf("update kept no metadata: %+v", up)
	}
	up = mustJSON[client.Secret](t, srv, "secret", "update", "gh-token", "--value", "third-value", "--metadata", "owner=me")
	if up.CurrentVersion != 3 || up.Metadata["owner"] != "me" {
		t.Errorf("update %+v", up)
	}
	if info := mustJSON[client.Secret](t, srv, "secret", "info", up.SecretID); info.Name != "gh-token" {
		t.Errorf("info %+v", info)
	}
	list := mustJSON[[]client.Secret](t, srv, "secret", "list")
	if len(list) != 2 || list[0].Name != "gh-token" {
		t.Errorf("list %+v", list)
	}
	human := runCLI(t, srv, nil, "secret", "list")
	if human.code != 0 || !strings.Contains(human.stdout, "VERSION") || !strings.Contains(human.stdout, "gh-token") {
		t.Errorf("list: %s", human.stdout)
	}
	for _, out := range []string{r.stdout, human.stdout} {
		if strings.Contains(out, "third-value") || strings.Contains(out, "flag-value") {
			t.Errorf("output holds a value: %s", out)
		}
	}
	if r := runCLI(t, srv, strings.NewReader(""), "secret", "create", "empty"); r.code == 0 || !strings.Contains(r.stderr, "no value") {
		t.Errorf("empty stdin: %d %s", r.code, r.stderr)
	}
	if d := mustJSON[map[string]any](t, srv, "secret", "delete", "gh-token"); d["deleted"] != true {
		t.Errorf("delete %v", d)
	}
	if r := runCLI(t, srv, nil, "secret", "info", "gh-token"); r.code == 0 {
		t.Error("info of a deleted secret succeeded")
	}
	sb := mustJSON[client.Sandbox](t, srv, "sandbox", "create", "--iam-token", "aws=sts.amazonaws.com")
	defer runCLI(t, srv, nil, "sandbox", "kill", sb.SandboxID)
	if sent := string(srv.LastRequest().Body); !strings.Contains(sent, `"iam":{"tokens":{"aws":{"audience":"sts.amazonaws.com","tokenType":"JWT-SVID"}}}`) {
		t.Errorf("create body %s", sent)
	}
}
