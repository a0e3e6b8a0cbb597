package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/forkbox/forkbox/client"
	"github.com/forkbox/forkbox/internal/daemon/daemontest"
	"github.com/forkbox/forkbox/internal/images"
	"github.com/forkbox/forkbox/internal/oci/ocitest"
	"github.com/forkbox/forkbox/internal/store"
)

// TestOldDataDirMigrates starts a daemon on a data dir laid out as before
// the image store owned every image — layers and template images under
// builds/{layers,images}, records naming them by path, built-in template
// images beside their root filesystems, an unpacked-image cache in
// oci/rootfs — holding a user template, and a running and a paused
// sandbox and a snapshot of a template deleted before. After the restart
// all of them work: what the deleted template's users run on is held by
// their migrated records (the start-up collection would remove it
// otherwise), and it stays where it was (the paused sandbox's and the
// snapshot's checkpoints name their layer's path). Deleting everything
// then frees the content at once, and once no layer is left in builds/
// the next start moves to the new layout.
//
// The old layout is made by this daemon (a layer in builds/layers/ makes
// it keep builds/ as its content root) and its records and directories
// rewritten as the old code wrote them: the checkpoints then name the
// paths old ones did.
func TestOldDataDirMigrates(t *testing.T) {
	ctx := context.Background()
	reg := ocitest.Registry(t)
	pushBusybox(t, ocitest.Host(reg))
	dir := dataDir(t)
	if err := os.MkdirAll(filepath.Join(dir, "builds", "layers", strings.Repeat("0", 64)), 0o755); err != nil {
		t.Fatal(err)
	}
	d := startDaemonIn(t, dir, "--registry-mirror", "docker.io="+reg, "--pool-size", "0")
	c := client.New(d.URL, d.APIKey)
	buildOld(t, c, "fbx-old")
	buildOld(t, c, "fbx-gone")
	running := createIn(t, c, "fbx-gone")
	paused := createIn(t, c, "fbx-gone")
	if err := c.Pause(ctx, paused.SandboxID); err != nil {
		t.Fatal(err)
	}
	snap, err := c.Snapshot(ctx, running.SandboxID, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteTemplate(ctx, "fbx-gone"); err != nil {
		t.Fatal(err)
	}
	d.Terminate()
	layOutOld(t, dir)
	d.Restart()
	c = client.New(d.URL, d.APIKey)

	say(t, c, running, "fbx-gone\n")
	resumed, err := c.Connect(ctx, paused.SandboxID, time.Minute)
	if err != nil {
		t.Fatalf("resume the paused sandbox after the migration: %v", err)
	}
	say(t, c, resumed, "fbx-gone\n")
	for from, want := range map[string]string{"fbx-old": "fbx-old\n", snap.SnapshotID: "fbx-gone\n"} {
		sb := createIn(t, c, from)
		say(t, c, sb, want)
		c.KillSandbox(ctx, sb.SandboxID)
	}
	for _, p := range []string{"oci/rootfs", "builds/images"} {
		if _, err := os.Stat(filepath.Join(dir, p)); err == nil {
			t.Errorf("%s is left after the migration", p)
		}
	}
	checkMigrated(t, d, c, snap.SnapshotID, running.SandboxID, paused.SandboxID)
}

// checkMigrated deletes everything that holds the old data dir's user
// content and checks that it leaves the disk at once, then that the next
// start lays the data dir out the new way.
func checkMigrated(t *testing.T, d *daemontest.Daemon, c *client.Client, snap string, sandboxes ...string) {
	ctx := context.Background()
	layers := filepath.Join(d.DataDir, "builds", "layers")
	if n := len(entryNames(t, layers)); n != 4 {
		t.Fatalf("builds/layers holds %d entries, want fbx-old's three (the image's, its base, its RUN) and fbx-gone's RUN", n)
	}
	if err := c.DeleteTemplate(ctx, "fbx-old"); err != nil {
		t.Fatal(err)
	}
	for _, id := range sandboxes {
		if err := c.KillSandbox(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.DeleteSnapshot(ctx, snap); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(entryNames(t, layers)) > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if left := entryNames(t, layers); len(left) > 0 {
		t.Fatalf("the migrated template's layers stayed with nothing holding them: %v", left)
	}
	d.Terminate()
	d.Restart()
	if imgs := entryNames(t, filepath.Join(d.DataDir, "images", "templates")); len(imgs) != 2 {
		t.Errorf("after the move to the new layout images/templates holds %v, want the two built-in images", imgs)
	}
	if _, err := os.Stat(filepath.Join(d.DataDir, "builds", "templates")); err == nil {
		t.Error("builds/templates is left after the move to the new layout")
	}
}

// buildOld builds template name from the busybox image, with a layer of
// its own: its /old says its name.
func buildOld(t *testing.T, c *client.Client, name string) {
	ctx := context.Background()
	tk, err := c.RequestTemplateBuild(ctx, name, nil, 1, 256)
	if err != nil {
		t.Fatal(err)
	}
	spec := client.TemplateBuildSpec{FromImage: "docker.io/fbx/busybox:1", Steps: []client.TemplateStep{
		{Type: "RUN", Args: []string{"echo " + name + " > /old", "root"}},
	}}
	if err := c.StartTemplateBuild(ctx, tk.TemplateID, tk.BuildID, spec); err != nil {
		t.Fatal(err)
	}
	st := waitBuild(t, c, tk.TemplateID, tk.BuildID, func(st *client.TemplateBuildStatus) bool { return st.Status == "ready" || st.Status == "error" })
	if st.Status != "ready" {
		t.Fatalf("build: %+v", st)
	}
}

func createIn(t *testing.T, c *client.Client, from string) *client.Sandbox {
	t.Helper()
	sb, err := c.CreateSandbox(context.Background(), client.CreateOptions{TemplateID: from, Timeout: 5 * time.Minute})
	if err != nil {
		t.Fatalf("create from %s: %v", from, err)
	}
	return sb
}

// say checks that sandbox sb's /old says want.
func say(t *testing.T, c *client.Client, sb *client.Sandbox, want string) {
	t.Helper()
	var out bytes.Buffer
	code, err := c.Conn(sb.SandboxID, sb.EnvdAccessToken).Exec(context.Background(), client.ExecOptions{Cmd: []string{"cat", "/old"}, Stdout: &out})
	if err != nil || code != 0 || out.String() != want {
		t.Errorf("sandbox %s: cat /old = %q, exit %d, %v; want %q", sb.SandboxID, out.String(), code, err, want)
	}
}

// layOutOld rewrites a stopped daemon's data dir as the code before the
// image store wrote it.
func layOutOld(t *testing.T, dir string) {
	ctx := context.Background()
	old := func(refs []images.ContentRef) (rootfs, image string) {
		if l, ok := images.Find(refs, images.KindLayer); ok {
			rootfs = filepath.Join(dir, "builds", "layers", l.Key)
		}
		if i, ok := images.Find(refs, images.KindTemplateImage); ok {
			image = filepath.Join(dir, "builds", "images", i.Key)
		}
		return rootfs, image
	}
	st, err := store.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	sbs, _, err := st.ListSandboxes(ctx, store.SandboxFilter{})
	must(t, err)
	for _, sb := range sbs {
		if r, _ := old(sb.Content); r != "" {
			sb.RootFS, sb.Content = r, nil
			must(t, st.PutSandbox(ctx, sb))
		}
	}
	for _, kind := range []string{store.KindTemplate, store.KindSnapshot} {
		tpls, err := st.ListTemplates(ctx, kind)
		must(t, err)
		for _, tp := range tpls {
			r, i := old(tp.Content)
			if r != "" {
				tp.RootFS = r
			}
			tp.ImageDir, tp.Content = i, nil
			must(t, st.PutTemplate(ctx, tp))
		}
	}
	layOutOldRecords(t, dir, old)
	b := filepath.Join(dir, "builds")
	must(t, os.Rename(filepath.Join(b, "templates"), filepath.Join(b, "images")))
	must(t, os.MkdirAll(filepath.Join(b, "images", strings.Repeat("e", 64)+".tmp-1"), 0o755))
	must(t, os.MkdirAll(filepath.Join(dir, "oci", "rootfs", strings.Repeat("f", 64), "etc"), 0o755))
}

// layOutOldRecords rewrites the template build records: the template's
// layer and each published build's content by path.
func layOutOldRecords(t *testing.T, dir string, old func([]images.ContentRef) (string, string)) {
	files, err := filepath.Glob(filepath.Join(dir, "builds", "records", "*.json"))
	must(t, err)
	for _, f := range files {
		b, err := os.ReadFile(f)
		must(t, err)
		var r map[string]any
		must(t, json.Unmarshal(b, &r))
		if m, ok := r["meta"].(map[string]any); ok && m["layer"] != nil {
			m["rootfs"] = filepath.Join(dir, "builds", "layers", m["layer"].(string))
			delete(m, "layer")
		}
		for _, bl := range r["builds"].([]any) {
			p, ok := bl.(map[string]any)["published"].(map[string]any)
			if !ok {
				continue
			}
			var refs []images.ContentRef
			raw, _ := json.Marshal(p["content"])
			json.Unmarshal(raw, &refs)
			p["rootfs"], p["imageDir"] = old(refs)
			delete(p, "content")
		}
		b, err = json.Marshal(r)
		must(t, err)
		must(t, os.WriteFile(f, b, 0o600))
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
