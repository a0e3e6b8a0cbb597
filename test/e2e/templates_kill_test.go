package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/forkbox/forkbox/client"
	"github.com/forkbox/forkbox/internal/daemon/daemontest"
	"github.com/forkbox/forkbox/internal/runtime/gvisor"
)

// runscContainers are the containers with runsc processes under d's root.
func runscContainers(d *daemontest.Daemon) map[string]bool {
	out := map[string]bool{}
	for _, p := range gvisor.RunscProcesses(filepath.Join(d.DataDir, "runtime", "runsc")) {
		out[p.Container] = true
	}
	return out
}

// waitBuild polls a build's status until pred holds (or fails after 90 s).
func waitBuild(t *testing.T, c *client.Client, tplID, buildID string, pred func(*client.TemplateBuildStatus) bool) *client.TemplateBuildStatus {
	t.Helper()
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		st, err := c.GetTemplateBuildStatus(context.Background(), tplID, buildID, 0)
		if err == nil && pred(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("build %s: %+v, %v", buildID, st, err)
		}
	}
}

func logged(st *client.TemplateBuildStatus, s string) bool {
	for _, e := range st.LogEntries {
		if strings.Contains(e.Message, s) {
			return true
		}
	}
	return false
}

// checkBuildKilled kills the daemon (SIGKILL) in the middle of a build's
// RUN step: after a restart the build is `error` with a reason, no
// template is ready under its name, no build sandbox runs, nothing
// half-written is left in the layer store, and a retry builds.
func checkBuildKilled(t *testing.T, d *daemontest.Daemon) {
	ctx := context.Background()
	c := client.New(d.URL, d.APIKey)
	spec := client.TemplateBuildSpec{FromImage: "docker.io/fbx/busybox:1", Steps: []client.TemplateStep{
		{Type: "RUN", Args: []string{"echo step-started; sleep 300", "root"}},
	}}
	tk, err := c.RequestTemplateBuild(ctx, "fbx-killed", nil, 1, 256)
	if err != nil {
		t.Fatal(err)
	}
	before := runscContainers(d)
	if err := c.StartTemplateBuild(ctx, tk.TemplateID, tk.BuildID, spec); err != nil {
		t.Fatal(err)
	}
	waitBuild(t, c, tk.TemplateID, tk.BuildID, func(st *client.TemplateBuildStatus) bool { return logged(st, "step-started") })
	var boxes []string
	for id := range runscContainers(d) {
		if !before[id] {
			boxes = append(boxes, id)
		}
	}
	d.Kill9()
	d.Restart()
	c = client.New(d.URL, d.APIKey)
	st := waitBuild(t, c, tk.TemplateID, tk.BuildID, func(*client.TemplateBuildStatus) bool { return true })
	if st.Status != "error" || st.Reason == nil || !strings.Contains(st.Reason.Message, "interrupted") {
		t.Errorf("build after the daemon was killed mid-step: %+v", st)
	}
	if sb, err := c.CreateSandbox(ctx, client.CreateOptions{TemplateID: "fbx-killed", Timeout: 30 * time.Second}); err == nil {
		c.KillSandbox(ctx, sb.SandboxID)
		t.Error("a sandbox started from the interrupted build's template")
	}
	running := runscContainers(d)
	for _, id := range boxes {
		if running[id] {
			t.Errorf("build sandbox %s still runs after the restart", id)
		}
	}
	for _, sub := range []string{"images/layers", "images/templates", "builds/work"} {
		ents, _ := os.ReadDir(filepath.Join(d.DataDir, sub))
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), ".new-") || sub == "builds/work" {
				t.Errorf("left after the restart: %s/%s", sub, e.Name())
			}
		}
	}
	// The retry (a quick step) is ready.
	spec.Steps[0].Args[0] = "echo retried > /retried"
	tk2, err := c.RequestTemplateBuild(ctx, "fbx-killed", nil, 1, 256)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.StartTemplateBuild(ctx, tk2.TemplateID, tk2.BuildID, spec); err != nil {
		t.Fatal(err)
	}
	st = waitBuild(t, c, tk2.TemplateID, tk2.BuildID, func(st *client.TemplateBuildStatus) bool { return st.Status == "ready" || st.Status == "error" })
	if st.Status != "ready" {
		t.Fatalf("retry after the kill: %+v", st)
	}
	if err := c.DeleteTemplate(ctx, "fbx-killed"); err != nil {
		t.Error(err)
	}
}
