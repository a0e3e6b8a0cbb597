package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/forkbox/forkbox/client"
	"github.com/forkbox/forkbox/internal/daemon/daemontest"
)

// TestDashboardNodes drives node a's dashboard in chromium while two
// daemons share one PostgreSQL: the Nodes view lists node-a (marked as
// the node serving the page) and node-b, both alive; a sandbox created on
// node b shows node-b as its node; Drain on node-b's row makes it draining
// (as the Go SDK sees it too) and Undrain makes it alive again; once node
// b has stopped, Remove on its row takes it out of the records.
func TestDashboardNodes(t *testing.T) {
	ctx := daemontest.Context(t)
	a, b := startPair(t, nodeArgs, nodeArgs)
	ca := client.New(a.URL, a.APIKey)
	onB := create(t, ctx, client.New(b.URL, a.APIKey), client.CreateOptions{})
	t.Cleanup(func() { ca.KillSandbox(context.Background(), onB.SandboxID) })

	bctx, row := openDashboard(t, ctx, a, onB.SandboxID)
	if got := text(t, bctx, row+" td.sb-node"); got != "node-b" {
		t.Errorf("the node of node b's sandbox: %q, want node-b", got)
	}
	waitJS(t, bctx, nodeBadge("node-a")+` === "alive" && `+nodeBadge("node-b")+` === "alive"`, "node-a and node-b alive")
	if got := text(t, bctx, nodeRow("node-a")); !strings.Contains(got, "this node") || !strings.Contains(got, a.URL) {
		t.Errorf("node-a's row: %q, want it marked as this node, at %s", got, a.URL)
	}
	if got := text(t, bctx, nodeRow("node-b")); strings.Contains(got, "this node") || !strings.Contains(got, b.URL) {
		t.Errorf("node-b's row: %q, want it at %s and not marked as this node", got, b.URL)
	}
	waitJS(t, bctx, `document.querySelector('`+nodeRow("node-b")+` td.node-load')?.textContent.startsWith("1 / ")`,
		"node-b running one sandbox")

	clickNodeAction(t, bctx, "node-b", "Drain")
	waitJS(t, bctx, nodeBadge("node-b")+` === "draining"`, "node-b draining")
	if n, err := ca.GetNode(ctx, "node-b"); err != nil || n.State != client.NodeDraining || !n.Draining {
		t.Errorf("node-b after Drain, as the SDK sees it: %+v %v", n, err)
	}
	screenshot(t, bctx)

	clickNodeAction(t, bctx, "node-b", "Undrain")
	waitJS(t, bctx, nodeBadge("node-b")+` === "alive"`, "node-b alive again")
	if n, err := ca.GetNode(ctx, "node-b"); err != nil || n.State != client.NodeAlive || n.Draining {
		t.Errorf("node-b after Undrain, as the SDK sees it: %+v %v", n, err)
	}

	// Node b retired: stopped cleanly with nothing left running, it is dead
	// at once, and its Remove button takes it out of the records.
	if err := ca.KillSandbox(ctx, onB.SandboxID); err != nil {
		t.Fatal(err)
	}
	b.Terminate()
	waitJS(t, bctx, nodeBadge("node-b")+` === "dead"`, "node-b dead")
	acceptDialogs(bctx)
	if err := chromedp.Do(bctx, chromedp.Click(chromedp.CSS(nodeRow("node-b")+" button.node-remove"))); err != nil {
		t.Fatalf("click Remove on node-b: %v", err)
	}
	waitJS(t, bctx, `!document.querySelector('`+nodeRow("node-b")+`') && !!document.querySelector('`+nodeRow("node-a")+`')`,
		"node-b removed, node-a listed")
	if _, err := ca.GetNode(ctx, "node-b"); !client.IsNotFound(err) {
		t.Errorf("node-b after Remove, as the SDK sees it: %v, want a 404", err)
	}
}

// acceptDialogs has the page's confirm() dialogs answered OK from now on.
func acceptDialogs(bctx context.Context) {
	dialogs := chromedp.Events(bctx, page.JavascriptDialogOpening)
	go func() {
		for _, err := range dialogs {
			if err != nil {
				return
			}
			chromedp.Call(bctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true})
		}
	}()
}

// nodeRow is the CSS selector of a node's row in the Nodes view.
func nodeRow(id string) string { return `#node-body tr[data-node="` + id + `"]` }

// nodeBadge is a JS expression: the text of a node's state badge.
func nodeBadge(id string) string {
	return `document.querySelector('` + nodeRow(id) + ` .badge')?.textContent`
}

// clickNodeAction clicks the button of a node's row, checking it is the
// one labelled want (Drain or Undrain).
func clickNodeAction(t *testing.T, bctx context.Context, id, want string) {
	t.Helper()
	button := nodeRow(id) + " td.actions button"
	if got := text(t, bctx, button); got != want {
		t.Fatalf("%s's button says %q, want %q", id, got, want)
	}
	if err := chromedp.Do(bctx, chromedp.Click(chromedp.CSS(button))); err != nil {
		t.Fatalf("click %s on %s: %v", want, id, err)
	}
}

// waitJS waits (the views refresh every 3 s) until the JS expression cond
// is true in the page.
func waitJS(t *testing.T, bctx context.Context, cond, what string) {
	t.Helper()
	if _, err := chromedp.Run(bctx, chromedp.Poll[bool](cond, chromedp.WithPollingTimeout(20*time.Second))); err != nil {
		t.Fatalf("the dashboard does not show %s: %v\n%q", what, err, text(t, bctx, "#node-card"))
	}
}
