package integration

import (
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestDashboardSecrets drives the dashboard's secrets card in headless
// chromium against a real daemon: every secret listed with its current
// version, and no value anywhere in the page.
func TestDashboardSecrets(t *testing.T) {
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("chromium not on PATH — run `make deps` (scripts/deps.sh installs Debian's chromium): %v", err)
	}
	ctx := daemontestContext(t)
	d, c := start(t)
	a, err := c.CreateSecret(ctx, "dash-a", "dash-value-one", map[string]string{"owner": "dash"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.UpdateSecret(ctx, a.SecretID, "dash-value-two", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateSecret(ctx, "dash-b", "dash-value-three", nil); err != nil {
		t.Fatal(err)
	}
	bctx := browser(t, ctx, chromium)
	row := func(id string) string { return `#sec-body tr[data-id="` + id + `"]` }
	if err := chromedp.Do(bctx,
		chromedp.Navigate(d.URL+"/dashboard/"),
		chromedp.WaitVisible(chromedp.CSS("#key-input")),
		chromedp.SendKeys(chromedp.CSS("#key-input"), d.APIKey),
		chromedp.Click(chromedp.CSS("#login-form button")),
		chromedp.WaitVisible(chromedp.CSS(row(a.SecretID))),
	); err != nil {
		t.Fatalf("log in and see the secrets listed: %v", err)
	}
	if got := text(t, bctx, row(a.SecretID)+" .sec-version"); got != "v2" {
		t.Errorf("dash-a's version: %q, want v2", got)
	}
	if got := text(t, bctx, row(a.SecretID)); !strings.Contains(got, "dash-a") || !strings.Contains(got, "owner=dash") {
		t.Errorf("dash-a's row: %q", got)
	}
	if got := text(t, bctx, "#sec-count"); got != "(2)" {
		t.Errorf("count %q", got)
	}
	html, err := chromedp.Run(bctx, chromedp.Evaluate[string]("document.documentElement.outerHTML"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(html, "dash-value") {
		t.Error("the page holds a secret value")
	}
	screenshot(t, bctx)
}

// TestSecretsSurviveRestart: a restarted daemon keeps its secrets (the
// same key from the data dir opens them) and its OIDC signing key.
func TestSecretsSurviveRestart(t *testing.T) {
	ctx := daemontestContext(t)
	d, c := start(t)
	s, err := c.CreateSecret(ctx, "kept", "kept-value", nil)
	if err != nil {
		t.Fatal(err)
	}
	jwks := func() string {
		resp, err := http.Get(d.URL + "/.well-known/jwks.json")
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("jwks without a key: %v %v", resp, err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	before := jwks()
	key, err := os.ReadFile(filepath.Join(d.DataDir, "secrets.key"))
	if err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(filepath.Join(d.DataDir, "secrets.key"))
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("secrets.key mode %v", fi.Mode().Perm())
	}
	d.Terminate()
	d.Restart()
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	got, err := c.GetSecret(rctx, "kept")
	if err != nil || got.SecretID != s.SecretID || got.CurrentVersion != 1 {
		t.Fatalf("after restart: %+v %v", got, err)
	}
	if again, _ := os.ReadFile(filepath.Join(d.DataDir, "secrets.key")); string(again) != string(key) {
		t.Error("the restart made another secrets key")
	}
	if after := jwks(); after != before {
		t.Errorf("the restart changed the signing keys:\n%s\n%s", before, after)
	}
}
