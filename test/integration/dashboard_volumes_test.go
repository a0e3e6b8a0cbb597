package integration

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/forkbox/forkbox/client"
)

// TestDashboardVolumes drives the dashboard's volumes card in headless
// chromium against a real daemon: a volume a sandbox mounts is listed
// with that sandbox and its path, an unused one says "not mounted".
func TestDashboardVolumes(t *testing.T) {
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("chromium not on PATH — run `make deps` (scripts/deps.sh installs Debian's chromium): %v", err)
	}
	ctx := daemontestContext(t)
	d, c := start(t)
	used, err := c.CreateVolume(ctx, "dash-used")
	if err != nil {
		t.Fatal(err)
	}
	idle, err := c.CreateVolume(ctx, "dash-idle")
	if err != nil {
		t.Fatal(err)
	}
	sb := create(t, ctx, c, client.CreateOptions{TemplateID: "base", VolumeMounts: []client.VolumeMount{{Name: "dash-used", Path: "/mnt/shared"}}})

	bctx := browser(t, ctx, chromium)
	row := func(id string) string { return `#vol-body tr[data-id="` + id + `"]` }
	if err := chromedp.Do(bctx,
		chromedp.Navigate(d.URL+"/dashboard/"),
		chromedp.WaitVisible(chromedp.CSS("#key-input")),
		chromedp.SendKeys(chromedp.CSS("#key-input"), d.APIKey),
		chromedp.Click(chromedp.CSS("#login-form button")),
		chromedp.WaitVisible(chromedp.CSS(row(used.ID))),
		chromedp.WaitVisible(chromedp.CSS(row(idle.ID))),
	); err != nil {
		t.Fatalf("log in and see the volumes listed: %v", err)
	}
	if got := text(t, bctx, row(used.ID)+" .vol-mounts"); !strings.Contains(got, sb.SandboxID) || !strings.Contains(got, "/mnt/shared") {
		t.Errorf("the used volume's mounts: %q, want %s at /mnt/shared", got, sb.SandboxID)
	}
	if got := text(t, bctx, row(idle.ID)+" .vol-mounts"); got != "not mounted" {
		t.Errorf("the idle volume's mounts: %q", got)
	}
	if err := c.KillSandbox(ctx, sb.SandboxID); err != nil {
		t.Fatal(err)
	}
	for _, v := range []*client.Volume{used, idle} {
		if err := c.DeleteVolume(ctx, v.ID); err != nil {
			t.Error(err)
		}
	}
}
