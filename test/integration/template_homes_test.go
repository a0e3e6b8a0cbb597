package integration

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/forkbox/forkbox/client"
	"github.com/forkbox/forkbox/internal/oci/ocitest"
)

// hasLog reports whether es has an entry of step (any, when "") whose
// message holds msg.
func hasLog(es []client.TemplateLogEntry, step, msg string) bool {
	return slices.ContainsFunc(es, func(e client.TemplateLogEntry) bool {
		return (step == "" || e.Step == step) && strings.Contains(e.Message, msg)
	})
}

// TestTemplateHomes: a user template's build record lives on one node of
// a cluster, and every node serves it. The first build of a new template,
// asked of drained node a, is placed on node b; its upload link, start,
// status and list go through a; a rebuild of the same name through a
// goes to b (not a second record: "name taken"). Node b dies with -9 in
// the middle of a build: asked through a, the build reports that its node
// died, a takes the record over with the builds' logs (the interrupted
// one's up to its step), and a rebuild there is ready and starts a
// sandbox.
func TestTemplateHomes(t *testing.T) {
	ctx := daemontestContext(t)
	a, b := startSharedPair(t, nil)
	ca := client.New(a.URL, a.APIKey)
	host := ocitest.Host(ocitest.Registry(t))
	ocitest.Push(t, host, "fbx/busybox:1", v1.Config{Env: []string{"PATH=/bin"}}, []v1.Layer{ocitest.BusyboxLayer(t, nil)})
	from := host + "/fbx/busybox:1"
	step := func(cmd string) []client.TemplateStep {
		return []client.TemplateStep{{Type: "RUN", Args: []string{cmd, "root"}}}
	}

	if _, err := ca.DrainNode(ctx, "node-a"); err != nil {
		t.Fatal(err)
	}
	tk, st := buildTemplate(t, ctx, ca, "homed", client.TemplateBuildSpec{FromImage: from, Steps: step("echo one > /v")})
	if st.Status != "ready" {
		t.Fatalf("first build through a: %+v", st)
	}
	if ready := "template build ready"; !strings.Contains(b.Log(), ready) || strings.Contains(a.Log(), ready) {
		t.Errorf("the first build of a template asked of drained node a did not run on node b")
	}
	if _, err := ca.UndrainNode(ctx, "node-a"); err != nil {
		t.Fatal(err)
	}
	hash := strings.Repeat("ab", 32)
	tgz := tarGz(t, "v", "two\n")
	if uploaded, err := ca.UploadTemplateFiles(ctx, tk.TemplateID, hash, bytes.NewReader(tgz), int64(len(tgz))); err != nil || !uploaded {
		t.Fatalf("upload through a of b's template's files: uploaded %v, %v", uploaded, err)
	}
	listed := func() *client.Template {
		ts, err := ca.ListTemplates(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for i := range ts {
			if ts[i].TemplateID == tk.TemplateID {
				return &ts[i]
			}
		}
		return nil
	}
	if l := listed(); l == nil || l.BuildStatus != "ready" {
		t.Errorf("node a lists node b's template as %+v", l)
	}

	tk2, st := buildTemplate(t, ctx, ca, "homed", client.TemplateBuildSpec{FromImage: from,
		Steps: []client.TemplateStep{{Type: "COPY", Args: []string{"v", "/v", "", ""}, FilesHash: hash}}})
	if st.Status != "ready" || tk2.TemplateID != tk.TemplateID {
		t.Fatalf("rebuild through a: %+v (template %s, first %s)", st, tk2.TemplateID, tk.TemplateID)
	}

	if got := sh(t, ctx, create(t, ctx, ca, client.CreateOptions{TemplateID: "homed"}).Conn(), "cat /v"); strings.TrimSpace(got) != "two" {
		t.Errorf("sandbox of the rebuild with uploaded files reads %q, want two", got)
	}

	tk3, err := ca.RequestTemplateBuild(ctx, "homed", nil, 1, 256)
	if err != nil {
		t.Fatal(err)
	}
	if err := ca.StartTemplateBuild(ctx, tk3.TemplateID, tk3.BuildID, client.TemplateBuildSpec{FromImage: from,
		Steps: step("sleep 600")}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, func() bool {
		st, err := ca.GetTemplateBuildStatus(ctx, tk3.TemplateID, tk3.BuildID, 0)
		return err == nil && st.Status == "building" && slices.ContainsFunc(st.LogEntries, func(e client.TemplateLogEntry) bool { return e.Step == "1" })
	})
	b.Kill9()
	waitFor(t, 15*time.Second, func() bool { n, err := ca.GetNode(ctx, "node-b"); return err == nil && n.State == client.NodeDead })
	st, err = ca.GetTemplateBuildStatus(ctx, tk3.TemplateID, tk3.BuildID, 0)
	if err != nil || st.Status != "error" || st.Reason == nil || !strings.Contains(st.Reason.Message, "node-b") {
		t.Fatalf("build of dead node b, asked through a: %+v %v", st, err)
	}
	if !strings.Contains(a.Log(), "template record taken over from a dead node") {
		t.Error("node a did not log taking the record over")
	}
	// The logs went with the record: the interrupted build's up to the
	// step it was in, the finished one's whole.
	if !hasLog(st.LogEntries, "1", "RUN sleep 600") {
		t.Errorf("the interrupted build's log lost its step: %+v", st.LogEntries)
	}
	if st2, err := ca.GetTemplateBuildStatus(ctx, tk2.TemplateID, tk2.BuildID, 0); err != nil || !hasLog(st2.LogEntries, "", "Build finished") {
		t.Errorf("dead node b's finished build, asked through a: %+v %v", st2, err)
	}
	tk4, st := buildTemplate(t, ctx, ca, "homed", client.TemplateBuildSpec{FromImage: from, Steps: step("echo four > /v")})
	if st.Status != "ready" || tk4.TemplateID != tk.TemplateID {
		t.Fatalf("rebuild on a after b died: %+v", st)
	}
	sb := create(t, ctx, ca, client.CreateOptions{TemplateID: "homed"})
	if got := sh(t, ctx, sb.Conn(), "cat /v"); strings.TrimSpace(got) != "four" {
		t.Errorf("sandbox of the rebuilt template reads %q, want four", got)
	}
}

// tarGz is a gzip'd tar of one file.
func tarGz(t *testing.T, name, body string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
		t.Fatal(err)
	}
	tw.Write([]byte(body))
	tw.Close()
	zw.Close()
	return buf.Bytes()
}
