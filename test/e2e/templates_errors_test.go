package e2e

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/forkbox/forkbox/client"
	"github.com/forkbox/forkbox/internal/daemon/daemontest"
)

// buildOnce requests and starts a build of name and waits for its end.
func buildOnce(t *testing.T, c *client.Client, name string, spec client.TemplateBuildSpec) *client.TemplateBuildStatus {
	t.Helper()
	tk, err := c.RequestTemplateBuild(context.Background(), name, nil, 1, 256)
	if err != nil {
		t.Fatalf("request build of %s: %v", name, err)
	}
	if spec.Steps == nil {
		spec.Steps = []client.TemplateStep{}
	}
	if err := c.StartTemplateBuild(context.Background(), tk.TemplateID, tk.BuildID, spec); err != nil {
		t.Fatalf("start build of %s: %v", name, err)
	}
	return waitBuild(t, c, tk.TemplateID, tk.BuildID, func(st *client.TemplateBuildStatus) bool {
		return st.Status == "ready" || st.Status == "error"
	})
}

// failsAt checks that a build ended in error at step with a message
// containing every want.
func failsAt(t *testing.T, what string, st *client.TemplateBuildStatus, step string, want ...string) {
	t.Helper()
	if st.Status != "error" || st.Reason == nil || st.Reason.Step != step {
		t.Errorf("%s: %+v, want an error at step %s", what, st, step)
		return
	}
	for _, w := range want {
		if !strings.Contains(st.Reason.Message, w) {
			t.Errorf("%s: reason %q lacks %q", what, st.Reason.Message, w)
		}
	}
}

// checkTemplateErrors: an unreachable registry and an unknown tag fail a
// build at its base step with a message naming them; upload errors are
// answered through the daemon (400, 409) and a COPY of files never
// uploaded fails its step; a second build of a template while one runs is
// refused with 409; the image's Entrypoint and Cmd are the start command
// of a build that names none.
func checkTemplateErrors(t *testing.T, d *daemontest.Daemon) {
	c := client.New(d.URL, d.APIKey)
	t0 := time.Now()
	failsAt(t, "unreachable registry", buildOnce(t, c, "fbx-unreachable", client.TemplateBuildSpec{FromImage: "127.0.0.1:1/fbx/busybox:1"}),
		"base", "127.0.0.1:1/fbx/busybox:1", "registry unreachable")
	t.Logf("unreachable registry reported after %s", time.Since(t0).Round(time.Millisecond))
	failsAt(t, "unknown tag", buildOnce(t, c, "fbx-notag", client.TemplateBuildSpec{FromImage: "docker.io/fbx/busybox:nosuch"}),
		"base", "fbx/busybox:nosuch", "MANIFEST_UNKNOWN")
	checkUploadErrors(t, d, c)
	checkConcurrentBuilds(t, c)
	st := buildOnce(t, c, "fbx-entry", client.TemplateBuildSpec{FromImage: "docker.io/fbx/httpd:1"})
	if st.Status != "ready" {
		t.Fatalf("build of the httpd image: %+v", st)
	}
	checkHTTP(t, d, "fbx-entry", 8080, "served by the image's entrypoint")
	for _, n := range []string{"fbx-unreachable", "fbx-notag", "fbx-entry"} {
		if err := c.DeleteTemplate(context.Background(), n); err != nil {
			t.Errorf("delete %s: %v", n, err)
		}
	}
}

// uploadTar is a gzip-less tar of one file.
func uploadTar(name, body string) []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg})
	tw.Write([]byte(body))
	tw.Close()
	return buf.Bytes()
}

// put PUTs an upload as the SDK does and returns the status.
func put(t *testing.T, d *daemontest.Daemon, tplID, hash string, body []byte) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPut, d.URL+"/templates/"+tplID+"/files/"+hash, bytes.NewReader(body))
	req.Header.Set("X-API-Key", d.APIKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// checkUploadErrors: an upload escaping its root is 400, a malformed hash
// 400, other files under an uploaded hash 409 (the first upload stays and
// builds); a COPY of a hash never uploaded fails its step.
func checkUploadErrors(t *testing.T, d *daemontest.Daemon, c *client.Client) {
	ctx := context.Background()
	tk, err := c.RequestTemplateBuild(ctx, "fbx-upload", nil, 1, 256)
	if err != nil {
		t.Fatal(err)
	}
	hash := strings.Repeat("5e", 32)
	for _, tc := range []struct {
		what, hash string
		body       []byte
		want       int
	}{
		{"escaping", hash, uploadTar("../evil", "x"), http.StatusBadRequest},
		{"bad hash", "nothex", uploadTar("a.txt", "x"), http.StatusBadRequest},
		{"first", hash, uploadTar("a.txt", "first\n"), http.StatusCreated},
		{"same again", hash, uploadTar("a.txt", "first\n"), http.StatusCreated},
		{"other files", hash, uploadTar("a.txt", "second\n"), http.StatusConflict},
	} {
		if got := put(t, d, tk.TemplateID, tc.hash, tc.body); got != tc.want {
			t.Errorf("upload %s: %d, want %d", tc.what, got, tc.want)
		}
	}
	spec := client.TemplateBuildSpec{FromImage: "docker.io/fbx/busybox:1", Steps: []client.TemplateStep{
		{Type: "COPY", Args: []string{"a.txt", "/a.txt", "root", ""}, FilesHash: hash},
		{Type: "COPY", Args: []string{"b.txt", "/b.txt", "root", ""}, FilesHash: strings.Repeat("0f", 32)},
	}}
	if err := c.StartTemplateBuild(ctx, tk.TemplateID, tk.BuildID, spec); err != nil {
		t.Fatal(err)
	}
	st := waitBuild(t, c, tk.TemplateID, tk.BuildID, func(st *client.TemplateBuildStatus) bool { return st.Status == "error" || st.Status == "ready" })
	failsAt(t, "COPY of files never uploaded", st, "2", "b.txt", "were not uploaded")
	logs, err := c.TemplateBuildLogs(ctx, tk.TemplateID, tk.BuildID, client.TemplateLogsOptions{Direction: "backward", Limit: 1})
	if err != nil || len(logs) != 1 || logs[0].Level != "error" || logs[0].Step != "2" {
		t.Errorf("the build's last log entry: %+v %v", logs, err)
	}
	spec.Steps = spec.Steps[:1]
	if st := buildOnce(t, c, "fbx-upload", spec); st.Status != "ready" {
		t.Errorf("build with the first upload: %+v", st)
	}
	if err := c.DeleteTemplate(ctx, "fbx-upload"); err != nil {
		t.Error(err)
	}
}

// checkConcurrentBuilds: while a build of a template runs, requesting or
// starting another build of it answers 409; two builds started at once
// get one 202 and one 409.
func checkConcurrentBuilds(t *testing.T, c *client.Client) {
	ctx := context.Background()
	slow := client.TemplateBuildSpec{FromImage: "docker.io/fbx/busybox:1", Steps: []client.TemplateStep{
		{Type: "RUN", Args: []string{"sleep 3; echo slow > /slow", "root"}, Force: true},
	}}
	var tks [2]*client.TemplateBuildTicket
	for i := range tks {
		tk, err := c.RequestTemplateBuild(ctx, "fbx-twice", nil, 1, 256)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		tks[i] = tk
	}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, tk := range tks {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = c.StartTemplateBuild(ctx, tk.TemplateID, tk.BuildID, slow) }()
	}
	wg.Wait()
	started := -1
	for i, err := range errs {
		switch {
		case err == nil:
			started = i
		case !errors.Is(err, client.ErrConflict) || !strings.Contains(err.Error(), "already building"):
			t.Errorf("start %d: %v, want 409 already building", i, err)
		}
	}
	if started < 0 || errs[0] == nil && errs[1] == nil {
		t.Fatalf("two starts at once: %v", errs)
	}
	if _, err := c.RequestTemplateBuild(ctx, "fbx-twice", nil, 1, 256); !errors.Is(err, client.ErrConflict) || !strings.Contains(err.Error(), "already building") {
		t.Errorf("request during a build: %v, want 409 already building", err)
	}
	st := waitBuild(t, c, tks[started].TemplateID, tks[started].BuildID, func(st *client.TemplateBuildStatus) bool { return st.Status == "ready" || st.Status == "error" })
	if st.Status != "ready" {
		t.Errorf("the build that started: %+v", st)
	}
	if err := c.DeleteTemplate(ctx, "fbx-twice"); err != nil {
		t.Error(err)
	}
}
