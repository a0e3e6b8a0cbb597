package integration

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/forkbox/forkbox/client"
	"github.com/forkbox/forkbox/internal/runtime/gvisor"
)

// TestDashboardShowsDeaths drives the dashboard in chromium while a listed
// sandbox's sentry is killed from outside: the sandbox leaves the list and
// "Died on their own" shows it with its reason.
func TestDashboardShowsDeaths(t *testing.T) {
	ctx := daemontestContext(t)
	d, c := start(t)
	sb := create(t, ctx, c, client.CreateOptions{})
	bctx, row := openDashboard(t, ctx, d, sb.SandboxID)
	if hidden, _ := chromedp.Run(bctx, chromedp.Evaluate[bool](`document.getElementById("deaths").hidden`)); !hidden {
		t.Errorf("\"Died on their own\" shows before anything died")
	}

	cid := containerOf(t, d, sb.SandboxID)
	pid := gvisor.SentryPid(filepath.Join(d.DataDir, "runtime", "runsc"), cid)
	if pid == 0 {
		t.Fatalf("no runsc-sandbox process of %s", cid)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// The list refreshes every 3 s; the death is then asked about.
	item := `(document.querySelector('#deaths-list')?.textContent ?? "")`
	if _, err := chromedp.Run(bctx, chromedp.Poll[bool](item+`.includes("`+sb.SandboxID+`")`,
		chromedp.WithPollingTimeout(30*time.Second))); err != nil {
		t.Fatalf("the dashboard does not list the dead sandbox: %v", err)
	}
	text, _ := chromedp.Run(bctx, chromedp.Evaluate[string](item))
	if !strings.Contains(text, sb.SandboxID+" killed: killed") {
		t.Errorf("\"Died on their own\" says %q, want %s with reason killed", text, sb.SandboxID)
	}
	if n, _ := chromedp.Run(bctx, chromedp.Evaluate[int](`document.querySelectorAll('`+row+`').length`)); n != 0 {
		t.Errorf("the dead sandbox is still in the list")
	}
	if hidden, _ := chromedp.Run(bctx, chromedp.Evaluate[bool](`document.getElementById("deaths").hidden`)); hidden {
		t.Errorf("\"Died on their own\" is hidden")
	}
	if info, err := c.GetSandbox(ctx, sb.SandboxID); err != nil || info.KillReason != "killed" {
		t.Errorf("the API says %+v, %v", info, err)
	}
	screenshot(t, bctx)
}
