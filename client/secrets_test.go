package client_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/forkbox/forkbox/client"
)

// TestSecrets walks the SDK's secret calls against the in-process daemon:
// versions, lookup by name, paging, exists, delete, and no answer carrying
// the value.
func TestSecrets(t *testing.T) {
	srv, c := newFake(t)
	ctx := context.Background()
	s, err := c.CreateSecret(ctx, "Deploy-Key", "v-123456789", map[string]string{"env": "prod"})
	if err != nil {
		t.Fatal(err)
	}
	if s.Name != "deploy-key" || s.CurrentVersion != 1 || s.Metadata["env"] != "prod" || s.CreatedAt.IsZero() {
		t.Fatalf("created %+v", s)
	}
	if got, err := c.GetSecret(ctx, "deploy-key"); err != nil || got.SecretID != s.SecretID {
		t.Fatalf("get by name: %+v %v", got, err)
	}
	up, err := c.UpdateSecret(ctx, s.SecretID, "v-2", nil)
	if err != nil || up.CurrentVersion != 2 || up.Metadata["env"] != "prod" {
		t.Fatalf("update: %+v %v", up, err)
	}
	for _, n := range []string{"b", "c"} {
		if _, err := c.CreateSecret(ctx, n, "v", nil); err != nil {
			t.Fatal(err)
		}
	}
	page, next, err := c.ListSecrets(ctx, 2, "")
	if err != nil || len(page) != 2 || next == "" {
		t.Fatalf("page 1: %v %q %v", page, next, err)
	}
	page, next, err = c.ListSecrets(ctx, 2, next)
	if err != nil || len(page) != 1 || page[0].Name != "c" || next != "" {
		t.Fatalf("page 2: %v %q %v", page, next, err)
	}
	if ok, err := c.SecretExists(ctx, "deploy-key"); !ok || err != nil {
		t.Fatalf("exists: %v %v", ok, err)
	}
	if err := c.DeleteSecret(ctx, "deploy-key"); err != nil {
		t.Fatal(err)
	}
	if ok, err := c.SecretExists(ctx, s.SecretID); ok || err != nil {
		t.Fatalf("exists after delete: %v %v", ok, err)
	}
	if err := c.DeleteSecret(ctx, "deploy-key"); !client.IsNotFound(err) {
		t.Fatalf("delete twice: %v", err)
	}
	if _, err := c.CreateSecret(ctx, "bad{name", "v", nil); !errors.Is(err, client.ErrBadRequest) {
		t.Fatalf("bad name: %v", err)
	}
	for _, r := range srv.Requests() {
		if r.Method == "GET" && strings.Contains(string(r.Body), "v-123456789") {
			t.Fatalf("a read sent the value")
		}
	}
}

// TestCreateWithIAM: iam.tokens reach the server as E2B's SDK sends them,
// and a rule naming an undefined token or an unknown secret is a 400.
func TestCreateWithIAM(t *testing.T) {
	srv, c := newFake(t)
	ctx := context.Background()
	rules := func(v string) *client.NetworkRules {
		return &client.NetworkRules{Rules: map[string][]client.NetworkRule{
			"api.example.test": {{Transform: &client.NetworkTransform{Headers: map[string]string{"Authorization": "Bearer " + v}}}},
		}}
	}
	iam := &client.IAM{Tokens: map[string]client.IAMToken{"rp": {Audience: "https://rp.example", TokenType: client.JWTSVID}}}
	sb, err := c.CreateSandbox(ctx, client.CreateOptions{TemplateID: "base", Network: rules(client.TokenPlaceholder("rp")), IAM: iam})
	if err != nil {
		t.Fatal(err)
	}
	defer c.KillSandbox(ctx, sb.SandboxID)
	got := body(t, srv.LastRequest())["iam"]
	if g, w := mustJSON(t, got), `{"tokens":{"rp":{"audience":"https://rp.example","tokenType":"JWT-SVID"}}}`; g != w {
		t.Errorf("iam sent %s, want %s", g, w)
	}
	for _, v := range []string{client.TokenPlaceholder("other"), client.SecretPlaceholder("missing")} {
		_, err := c.CreateSandbox(ctx, client.CreateOptions{TemplateID: "base", Network: rules(v), IAM: iam})
		if !errors.Is(err, client.ErrBadRequest) {
			t.Errorf("rule %q: %v, want a 400", v, err)
		}
	}
}
