package integration

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/forkbox/forkbox/client"
	"github.com/forkbox/forkbox/internal/oci/ocitest"
)

// buildTemplate requests and starts a build of name and waits for its end.
func buildTemplate(t *testing.T, ctx context.Context, c *client.Client, name string, spec client.TemplateBuildSpec) (*client.TemplateBuildTicket, *client.TemplateBuildStatus) {
	t.Helper()
	tk, err := c.RequestTemplateBuild(ctx, name, nil, 1, 256)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.StartTemplateBuild(ctx, tk.TemplateID, tk.BuildID, spec); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		st, err := c.GetTemplateBuildStatus(ctx, tk.TemplateID, tk.BuildID, 0)
		if err == nil && (st.Status == "ready" || st.Status == "error") {
			return tk, st
		}
		if time.Now().After(deadline) {
			t.Fatalf("build of %s: %+v %v", name, st, err)
		}
	}
}

// TestDashboardTemplates drives the dashboard's templates view in headless
// chromium against a real daemon: two templates built from an image in a
// loopback registry — one ready, one whose RUN step failed — are listed
// with their status; a click shows a template's builds and the selected
// build's log, and the failed one says at which step and why.
func TestDashboardTemplates(t *testing.T) {
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("chromium not on PATH — run `make deps` (scripts/deps.sh installs Debian's chromium): %v", err)
	}
	ctx := daemontestContext(t)
	host := ocitest.Host(ocitest.Registry(t))
	ocitest.Push(t, host, "fbx/busybox:1", v1.Config{Env: []string{"PATH=/bin"}}, []v1.Layer{ocitest.BusyboxLayer(t, nil)})
	d, c := start(t)
	image := host + "/fbx/busybox:1" // a loopback registry: plain HTTP
	good, st := buildTemplate(t, ctx, c, "dash-good", client.TemplateBuildSpec{FromImage: image,
		Steps: []client.TemplateStep{{Type: "RUN", Args: []string{"echo good > /good", "root"}}}})
	if st.Status != "ready" {
		t.Fatalf("dash-good: %+v", st)
	}
	bad, st := buildTemplate(t, ctx, c, "dash-bad", client.TemplateBuildSpec{FromImage: image,
		Steps: []client.TemplateStep{{Type: "RUN", Args: []string{"echo about to fail; exit 7", "root"}}}})
	if st.Status != "error" {
		t.Fatalf("dash-bad: %+v", st)
	}

	bctx := browser(t, ctx, chromium)
	row := func(id string) string { return `#tpl-body tr[data-id="` + id + `"]` }
	if err := chromedp.Do(bctx,
		chromedp.Navigate(d.URL+"/dashboard/"),
		chromedp.WaitVisible(chromedp.CSS("#key-input")),
		chromedp.SendKeys(chromedp.CSS("#key-input"), d.APIKey),
		chromedp.Click(chromedp.CSS("#login-form button")),
		chromedp.WaitVisible(chromedp.CSS(row(good.TemplateID))),
		chromedp.WaitVisible(chromedp.CSS(row(bad.TemplateID))),
		chromedp.WaitVisible(chromedp.CSS(row("base"))),
	); err != nil {
		t.Fatalf("log in and see the templates listed: %v", err)
	}
	for id, want := range map[string]string{good.TemplateID: "ready", bad.TemplateID: "error"} {
		if got := text(t, bctx, row(id)+" .badge"); got != want {
			t.Errorf("template %s's status badge: %q, want %q", id, got, want)
		}
	}
	if got := text(t, bctx, row(good.TemplateID)); !strings.Contains(got, "dash-good") {
		t.Errorf("dash-good's row: %q", got)
	}
	showBuild(t, bctx, row(good.TemplateID), good.BuildID, "Build finished")
	if got := text(t, bctx, "#tpl-progress"); got != "status ready" {
		t.Errorf("progress of the ready build: %q", got)
	}
	showBuild(t, bctx, row(bad.TemplateID), bad.BuildID, "exit status 7")
	if got := text(t, bctx, "#tpl-progress"); !strings.Contains(got, "failed at step 1") || !strings.Contains(got, "exit status 7") {
		t.Errorf("progress of the failed build: %q", got)
	}
	if got := text(t, bctx, "#tpl-log"); !strings.Contains(got, "[1] about to fail") {
		t.Errorf("the failed build's log lacks its step's output:\n%s", got)
	}
	screenshot(t, bctx)
}

// showBuild clicks a template's row and waits until its builds list has
// buildID and the log shows want.
func showBuild(t *testing.T, bctx context.Context, row, buildID, want string) {
	t.Helper()
	if err := chromedp.Do(bctx,
		chromedp.Click(chromedp.CSS(row+" td")),
		chromedp.WaitVisible(chromedp.CSS("#tpl-detail")),
	); err != nil {
		t.Fatalf("open %s: %v", row, err)
	}
	if _, err := chromedp.Run(bctx, chromedp.Poll[bool](
		`[...document.querySelectorAll('#tpl-builds button')].some(b => b.textContent === "`+buildID+`") && `+
			`document.getElementById('tpl-log').textContent.includes(`+"`"+want+"`"+`)`,
		chromedp.WithPollingTimeout(20*time.Second))); err != nil {
		t.Fatalf("build %s with %q in its log not shown: %v\nlog: %s", buildID, want, err, text(t, bctx, "#tpl-log"))
	}
}

// text is the text content of the first element sel matches.
func text(t *testing.T, bctx context.Context, sel string) string {
	t.Helper()
	got, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		t.Fatalf("text of %s: %v", sel, err)
	}
	return strings.TrimSpace(got)
}
