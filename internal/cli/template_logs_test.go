package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/forkbox/forkbox/client"
	"github.com/forkbox/forkbox/client/clienttest"
)

// template logs pages a build's log through the logs route: --level,
// --direction and --limit reach it, --json is the entries.
func TestTemplateLogsVerb(t *testing.T) {
	srv := clienttest.NewServer(t)
	c := client.New(srv.URL, clienttest.APIKey)
	ctx := context.Background()
	tk, err := c.RequestTemplateBuild(ctx, "app", nil, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.StartTemplateBuild(ctx, tk.TemplateID, tk.BuildID, client.TemplateBuildSpec{FromTemplate: "no-such", Steps: []client.TemplateStep{}}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		st, err := c.GetTemplateBuildStatus(ctx, tk.TemplateID, tk.BuildID, 0)
		if err == nil && st.Status == "error" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("build: %+v %v", st, err)
		}
	}
	all := mustJSON[[]client.TemplateLogEntry](t, srv, "template", "logs", "app", tk.BuildID)
	errs := mustJSON[[]client.TemplateLogEntry](t, srv, "template", "logs", "app", tk.BuildID, "--level", "error")
	last := mustJSON[[]client.TemplateLogEntry](t, srv, "template", "logs", "app", tk.BuildID, "--direction", "backward", "--limit", "1")
	if len(all) < 2 || len(errs) != 1 || errs[0].Level != "error" || len(last) != 1 || last[0].Message != all[len(all)-1].Message {
		t.Errorf("all %+v\nerror level %+v\nlast %+v", all, errs, last)
	}
	if r := runCLI(t, srv, nil, "template", "logs", "app", tk.BuildID); r.code != 0 || !strings.Contains(r.stdout, "[base]") {
		t.Errorf("plain output: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
}
