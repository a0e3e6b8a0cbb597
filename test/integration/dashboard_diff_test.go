package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/forkbox/forkbox/client"
)

// TestDashboardDiffInBrowser: in Chromium, clicking the label of the edge
// into a fork lists the files the fork changed, clicking a file shows its
// unified diff, and shift-clicking two nodes compares them.
func TestDashboardDiffInBrowser(t *testing.T) {
	ctx := daemontestContext(t)
	d, c := start(t)
	src := create(t, ctx, c, client.CreateOptions{})
	writeFile(t, ctx, src.Conn(), "/home/user/a.txt", "one\n")
	forks, err := c.Fork(ctx, src.SandboxID, 1, time.Minute)
	if err != nil || len(forks) != 1 || forks[0].Sandbox == nil {
		t.Fatalf("fork: %v %+v", err, forks)
	}
	child := forks[0].Sandbox
	t.Cleanup(func() { c.KillSandbox(context.Background(), child.SandboxID) })
	writeFile(t, ctx, child.Conn(), "/home/user/a.txt", "one\ntwo\n")
	writeFile(t, ctx, child.Conn(), "/home/user/b.txt", "new\n")

	bctx, row := openDashboard(t, ctx, d, src.SandboxID)
	edge := `#lineage g.edge-label[data-to="` + child.SandboxID + `"]`
	aRow := `#diff-body tr[data-path="/home/user/a.txt"]`
	if err := chromedp.Do(bctx,
		chromedp.WaitVisible(chromedp.CSS(`tr[data-id="`+child.SandboxID+`"]`)),
		chromedp.Click(chromedp.CSS(row+` td.mono`)),
		chromedp.WaitVisible(chromedp.CSS(edge)),
		chromedp.Click(chromedp.CSS(edge)),
		chromedp.WaitVisible(chromedp.CSS(aRow)),
		chromedp.WaitVisible(chromedp.CSS(`#diff-body tr[data-path="/home/user/b.txt"]`)),
	); err != nil {
		t.Fatalf("the edge into the fork lists its changed files: %v", err)
	}
	if kinds, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS(aRow))); err != nil || !strings.Contains(kinds, "content") {
		t.Errorf("a.txt's row says %q (%v), want a content change", kinds, err)
	}
	if err := chromedp.Do(bctx, chromedp.Click(chromedp.CSS(aRow))); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(bctx, chromedp.Poll[bool](`document.querySelector("#diff-patch").textContent.includes("+two")`,
		chromedp.WithPollingTimeout(20*time.Second))); err != nil {
		patch, _ := chromedp.Run(bctx, chromedp.Text(chromedp.CSS("#diff-patch")))
		t.Fatalf("the file's diff view: %v (shows %q)", err, patch)
	}

	// Shift-click the source, then the fork: the fork against the source.
	shift := func(id string) chromedp.Action[bool] {
		return chromedp.Evaluate[bool](`document.querySelector('#lineage g.node[data-id="` + id + `"]').dispatchEvent(
			new MouseEvent("click", {bubbles: true, cancelable: true, shiftKey: true}))`)
	}
	for _, id := range []string{src.SandboxID, child.SandboxID} {
		if _, err := chromedp.Run(bctx, shift(id)); err != nil {
			t.Fatalf("shift-click %s: %v", id, err)
		}
	}
	if _, err := chromedp.Run(bctx, chromedp.Poll[bool](`document.querySelector("#diff-of").textContent.startsWith(`+
		`"`+child.SandboxID+` against `+src.SandboxID+` · ")`, chromedp.WithPollingTimeout(20*time.Second))); err != nil {
		head, _ := chromedp.Run(bctx, chromedp.Text(chromedp.CSS("#diff-of")))
		t.Fatalf("two selected nodes compared: %v (heading %q)", err, head)
	}
	if err := chromedp.Do(bctx, chromedp.WaitVisible(chromedp.CSS(aRow)),
		chromedp.WaitVisible(chromedp.CSS(`#lineage g.node.compare[data-id="`+src.SandboxID+`"]`))); err != nil {
		t.Fatalf("compared nodes and their changes: %v", err)
	}
	screenshot(t, bctx)
}
