package identity

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
)

// clock is a test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// world is an issuer served over HTTP and a relying party's verifier
// (go-oidc, discovery and JWKS fetched from it) for audience aud.
func world(t *testing.T, dir string, c *clock) (*Issuer, func(aud string) *oidc.IDTokenVerifier) {
	t.Helper()
	var is *Issuer
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { is.ServeHTTP(w, r) }))
	t.Cleanup(srv.Close)
	var err error
	if is, err = New(Config{Issuer: srv.URL, Dir: dir, Now: c.now, RotateEvery: time.Hour}); err != nil {
		t.Fatal(err)
	}
	p, err := oidc.NewProvider(context.Background(), srv.URL)
	if err != nil {
		t.Fatalf("relying party cannot discover the issuer: %v", err)
	}
	return is, func(aud string) *oidc.IDTokenVerifier {
		return p.Verifier(&oidc.Config{ClientID: aud, Now: c.now, SupportedSigningAlgs: []string{oidc.ES256}})
	}
}

// TestTokenVerifies: a relying party with go-oidc verifies a token against
// the discovery document and JWKS, with the exact audience; another
// audience is refused; the subject names sandbox, template and team; a
// token is reused until a third of its life is left, then renewed.
func TestTokenVerifies(t *testing.T) {
	ctx := context.Background()
	c := &clock{t: time.Now()}
	is, verifier := world(t, t.TempDir(), c)
	sub := Subject{SandboxID: "sbx1", TemplateID: "base", Team: Team}
	tok, err := is.Token(ctx, sub, "https://rp.example/api")
	if err != nil {
		t.Fatal(err)
	}
	idt, err := verifier("https://rp.example/api").Verify(ctx, tok)
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	if want := "spiffe://127.0.0.1/team/default/template/base/sandbox/sbx1"; idt.Subject != want {
		t.Errorf("sub %q, want %q", idt.Subject, want)
	}
	var cl struct {
		SandboxID string `json:"sandbox_id"`
		Template  string `json:"template_id"`
	}
	if err := idt.Claims(&cl); err != nil || cl.SandboxID != "sbx1" || cl.Template != "base" {
		t.Errorf("claims %+v %v", cl, err)
	}
	if got := idt.Expiry.Sub(c.now()); got < 9*time.Minute || got > 11*time.Minute {
		t.Errorf("lifetime %v", got)
	}
	if _, err := verifier("https://other.example").Verify(ctx, tok); err == nil {
		t.Error("a token verified for another audience")
	}
	other, _ := is.Token(ctx, Subject{SandboxID: "sbx2", TemplateID: "base", Team: Team}, "https://rp.example/api")
	if other == tok {
		t.Error("two sandboxes share a token")
	}
	if again, _ := is.Token(ctx, sub, "https://rp.example/api"); again != tok {
		t.Error("a fresh token was not reused")
	}
	c.add(4 * time.Minute)
	if renewed, _ := is.Token(ctx, sub, "https://rp.example/api"); renewed == tok {
		t.Error("a token with 6 of 10 minutes left was not renewed")
	}
	c.add(7 * time.Minute)
	if _, err := verifier("https://rp.example/api").Verify(ctx, tok); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Errorf("expired token: %v", err)
	}
}

// TestKeyRotation: keys persist across restarts (mode 0600); a rotated-out
// key stays in the JWKS while its tokens live, so they still verify, and
// leaves after.
func TestKeyRotation(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	c := &clock{t: time.Now()}
	is, _ := world(t, dir, c)
	sub := Subject{SandboxID: "sbx1", TemplateID: "base", Team: Team}
	set, _ := is.JWKS()
	if len(set.Keys) != 1 {
		t.Fatalf("%d keys at start", len(set.Keys))
	}
	first := set.Keys[0].KeyID
	if fi, err := os.Stat(filepath.Join(dir, KeyFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file %v %v", fi, err)
	}
	c.add(time.Hour + time.Second)     // rotation due
	is2, verifier2 := world(t, dir, c) // a restart keeps the keys, rotates
	set, _ = is2.JWKS()
	if len(set.Keys) != 2 || set.Keys[0].KeyID != first {
		t.Fatalf("after rotation: %d keys, first %s (want %s kept)", len(set.Keys), set.Keys[0].KeyID, first)
	}
	fresh, _ := is2.Token(ctx, sub, "aud")
	if _, err := verifier2("aud").Verify(ctx, fresh); err != nil {
		t.Fatalf("token of the new key: %v", err)
	}
	c.add(DefaultTokenTTL + 2*time.Minute)
	set, _ = is2.JWKS()
	if len(set.Keys) != 1 || set.Keys[0].KeyID == first {
		t.Fatalf("retired key still published after its tokens expired: %d keys", len(set.Keys))
	}
}

// TestRotationKeepsLiveTokensVerifiable: a token signed just before a
// rotation verifies after it.
func TestRotationKeepsLiveTokensVerifiable(t *testing.T) {
	ctx := context.Background()
	c := &clock{t: time.Now()}
	is, verifier := world(t, t.TempDir(), c)
	c.add(time.Hour - time.Minute)
	tok, _ := is.Token(ctx, Subject{SandboxID: "s", TemplateID: "t", Team: Team}, "aud")
	c.add(2 * time.Minute) // rotation due
	set, _ := is.JWKS()
	if len(set.Keys) != 2 {
		t.Fatalf("%d keys after rotation", len(set.Keys))
	}
	if _, err := verifier("aud").Verify(ctx, tok); err != nil {
		t.Fatalf("token signed before the rotation: %v", err)
	}
}

// TestIssuerURL: only http(s) issuers.
func TestIssuerURL(t *testing.T) {
	for _, u := range []string{"", "ftp://x", "http://", "http://h/?q=1", "https://h/#f"} {
		if _, err := New(Config{Issuer: u, Dir: t.TempDir()}); err == nil {
			t.Errorf("issuer %q accepted", u)
		}
	}
}
