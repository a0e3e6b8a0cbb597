package integration

import (
	"context"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/forkbox/forkbox/client"
	"github.com/forkbox/forkbox/internal/daemon/daemontest"
)

// TestDashboardInBrowser drives the dashboard in Debian's chromium (headless,
// through chromedp) against a real daemon: log in with the key, see a
// sandbox appear, see a fork's lineage drawn, pause the sandbox from its
// row and see its state change. A screenshot of the end is written to the
// test's artifact directory, which `make test` keeps (go test -artifacts
// -outputdir; scripts/test-artifacts.sh lists it and fails the run without
// it). Chromium missing is a failure: `make deps` installs it.
func TestDashboardInBrowser(t *testing.T) {
	ctx := daemontestContext(t)
	d, c := start(t)
	src := create(t, ctx, c, client.CreateOptions{})
	bctx, row := openDashboard(t, ctx, d, src.SandboxID)

	forks, err := c.Fork(ctx, src.SandboxID, 1, time.Minute)
	if err != nil || len(forks) != 1 || forks[0].Sandbox == nil {
		t.Fatalf("fork: %v %+v", err, forks)
	}
	child := forks[0].Sandbox.SandboxID
	t.Cleanup(func() { c.KillSandbox(context.Background(), child) })
	// The lineage of the source, once the list (refreshed every 3 s) has
	// the fork, draws the fork's node beside the source's.
	if err := chromedp.Do(bctx,
		chromedp.WaitVisible(chromedp.CSS(`tr[data-id="`+child+`"]`)),
		chromedp.Click(chromedp.CSS(row+` td.mono`)),
		chromedp.WaitVisible(chromedp.CSS(`#lineage g.node[data-id="`+child+`"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#lineage g.node[data-id="`+src.SandboxID+`"]`)),
	); err != nil {
		t.Fatalf("lineage of %s with its fork %s: %v", src.SandboxID, child, err)
	}

	if err := chromedp.Do(bctx,
		chromedp.Click(chromedp.CSS(row+` td.actions button:first-child`)),
	); err != nil {
		t.Fatalf("pause from the dashboard: %v", err)
	}
	if _, err := chromedp.Run(bctx, chromedp.Poll[bool](`document.querySelector('`+row+` .badge')?.textContent === "paused"`,
		chromedp.WithPollingTimeout(30*time.Second))); err != nil {
		t.Fatalf("the dashboard does not show the pause: %v", err)
	}
	badge, _ := chromedp.Run(bctx, chromedp.Text(chromedp.CSS(row+` .badge`)))
	if got := state(t, ctx, c, src.SandboxID); got != "paused" {
		t.Errorf("the API says %s after the dashboard's pause (badge %q)", got, badge)
	}
	screenshot(t, bctx)
}

// The browser window's size, which the screenshot has.
const windowWidth, windowHeight = 1400, 1000

// openDashboard starts chromium, logs in to d's dashboard with its key and
// waits until sandbox id is listed; it returns the browser and the CSS
// selector of the sandbox's row. Chromium missing is a failure.
func openDashboard(t *testing.T, ctx context.Context, d *daemontest.Daemon, id string) (context.Context, string) {
	t.Helper()
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("chromium not on PATH — run `make deps` (scripts/deps.sh installs Debian's chromium): %v", err)
	}
	bctx := browser(t, ctx, chromium)
	row := `tr[data-id="` + id + `"]`
	if err := chromedp.Do(bctx,
		chromedp.Navigate(d.URL+"/dashboard/"),
		chromedp.WaitVisible(chromedp.CSS("#key-input")),
		chromedp.SendKeys(chromedp.CSS("#key-input"), d.APIKey),
		chromedp.Click(chromedp.CSS("#login-form button")), // Submit would bypass the form's submit handler
		chromedp.WaitVisible(chromedp.CSS(row)),
	); err != nil {
		t.Fatalf("log in and see sandbox %s listed: %v", id, err)
	}
	return bctx, row
}

// browser starts a headless chromium for the test; it is closed at the
// test's end.
func browser(t *testing.T, ctx context.Context, chromium string) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium),
		chromedp.NoSandbox, // tests run as root, where chromium's sandbox refuses to start
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(windowWidth, windowHeight),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	bctx, cancel := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	bctx, cancelTimeout := context.WithTimeout(bctx, 2*time.Minute)
	t.Cleanup(func() { cancelTimeout(); cancel(); cancelAlloc() })
	if err := chromedp.Do(bctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return bctx
}

// screenshot keeps a full-page PNG of the dashboard as a test artifact and
// checks what was written is the page as a PNG of the browser's width.
func screenshot(t *testing.T, bctx context.Context) {
	t.Helper()
	shot, err := chromedp.Run(bctx, chromedp.FullScreenshot(100)) // 100: PNG
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	name := strings.ReplaceAll(t.Name(), "/", "_") + ".png"
	path := filepath.Join(t.ArtifactDir(), name)
	if err := os.WriteFile(path, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("the screenshot was not kept: %v", err)
	}
	defer f.Close()
	cfg, err := png.DecodeConfig(f)
	if err != nil || cfg.Width != windowWidth || cfg.Height < windowHeight/2 {
		t.Fatalf("screenshot %s: %dx%d, %v; want a PNG %d wide", path, cfg.Width, cfg.Height, err, windowWidth)
	}
	t.Logf("screenshot: %s (%d bytes, %dx%d)", path, len(shot), cfg.Width, cfg.Height)
}
