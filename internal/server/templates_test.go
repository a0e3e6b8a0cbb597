package server

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	imagestore "github.com/forkbox/forkbox/internal/images"
	"github.com/forkbox/forkbox/internal/oci"
	"github.com/forkbox/forkbox/internal/runtime/fake"
	"github.com/forkbox/forkbox/internal/store"
	"github.com/forkbox/forkbox/internal/template/build"
)

// newTemplateEnv is a server whose template build service runs on the fake
// runtime (route behaviour only: the real pipeline is tested end to end).
func newTemplateEnv(t *testing.T) *env {
	dir := t.TempDir()
	return newEnv(t, func(c *Config) {
		images, err := oci.New(oci.Options{CacheDir: filepath.Join(dir, "oci")})
		if err != nil {
			t.Fatal(err)
		}
		up, err := build.NewUploads(filepath.Join(dir, "uploads"), 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		content, err := imagestore.OpenContent(filepath.Join(dir, "images"))
		if err != nil {
			t.Fatal(err)
		}
		c.Templates, err = build.New(build.Config{
			Runtime: fake.New(), Store: c.Keys.(*store.Store), Images: images, Content: content, Uploads: up, Dir: dir,
		})
		if err != nil {
			t.Fatal(err)
		}
	})
}

func tarGz(t *testing.T, name, body string) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg})
	tw.Write([]byte(body))
	tw.Close()
	zw.Close()
	return buf.Bytes()
}

func TestTemplateBuildRoutes(t *testing.T) {
	e := newTemplateEnv(t)
	var created struct {
		TemplateID, BuildID string
		Names, Tags         []string
	}
	resp, body := e.call("POST", "/v3/templates", map[string]any{"name": "app:v1", "tags": []string{"latest"}, "cpuCount": 1, "memoryMB": 256})
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("request build: %d %s", resp.StatusCode, body)
	}
	json.Unmarshal(body, &created)
	if created.TemplateID == "" || created.BuildID == "" || created.Names[0] != "app" || strings.Join(created.Tags, ",") != "v1,latest" {
		t.Fatalf("request build answer: %s", body)
	}
	hash := strings.Repeat("ab", 32)
	resp, body = e.call("GET", "/templates/"+created.TemplateID+"/files/"+hash, nil)
	var link struct {
		Present bool
		URL     string
		Headers map[string]string
	}
	json.Unmarshal(body, &link)
	if resp.StatusCode != http.StatusCreated || link.Present || !strings.HasSuffix(link.URL, "/templates/"+created.TemplateID+"/files/"+hash) {
		t.Fatalf("file link: %d %s", resp.StatusCode, body)
	}
	if resp, body = e.call("PUT", "/templates/"+created.TemplateID+"/files/"+hash, string(tarGz(t, "../escape", "x"))); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("escaping upload: %d %s, want 400", resp.StatusCode, body)
	}
	if resp, body = e.call("PUT", "/templates/"+created.TemplateID+"/files/"+hash, string(tarGz(t, "a.txt", "hello"))); resp.StatusCode != http.StatusCreated {
		t.Fatalf("upload: %d %s", resp.StatusCode, body)
	}
	if _, body = e.call("GET", "/templates/app/files/"+hash, nil); !strings.Contains(string(body), `"present":true`) {
		t.Fatalf("file link after upload: %s", body)
	}
	checkUploadNamespaces(t, e, created.TemplateID, hash)
	bpath := "/v2/templates/" + created.TemplateID + "/builds/" + created.BuildID
	if resp, body = e.call("POST", bpath, map[string]any{"fromImage": "x", "fromImageRegistry": map[string]any{"type": "aws"}}); resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "aws") {
		t.Fatalf("aws registry: %d %s, want 400", resp.StatusCode, body)
	}
	if resp, body = e.call("POST", bpath, map[string]any{"fromTemplate": "no-such-template", "steps": []any{}}); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("start build: %d %s", resp.StatusCode, body)
	}
	if resp, _ = e.call("POST", bpath, map[string]any{"fromTemplate": "no-such-template"}); resp.StatusCode != http.StatusConflict {
		t.Fatalf("second start of one build: %d, want 409", resp.StatusCode)
	}
	var st struct {
		Status     string
		LogEntries []build.LogEntry
		Reason     *build.Reason
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		_, body = e.call("GET", "/templates/"+created.TemplateID+"/builds/"+created.BuildID+"/status?logsOffset=0", nil)
		json.Unmarshal(body, &st)
		if st.Status == build.StatusError || time.Now().After(deadline) {
			break
		}
	}
	if st.Status != build.StatusError || st.Reason == nil || st.Reason.Step != "base" || !strings.Contains(st.Reason.Message, "no-such-template") {
		t.Fatalf("status of a build from an unknown template: %s", body)
	}
	_, body = e.call("GET", "/templates/"+created.TemplateID+"/builds/"+created.BuildID+"/status?logsOffset=1000", nil)
	if !strings.Contains(string(body), `"logEntries":[]`) {
		t.Fatalf("status past the end of the logs: %s", body)
	}
	checkBuildLogsRoute(t, e, "/templates/"+created.TemplateID+"/builds/"+created.BuildID+"/logs", st.LogEntries)
	for _, tc := range []struct {
		path string
		want int
	}{
		{"/templates/aliases/app", 200},
		{"/templates/aliases/nope", 404},
		{"/templates/aliases/base", 200},
		{"/templates/" + created.TemplateID, 200},
		{"/templates/" + created.TemplateID + "/tags", 200},
		{"/templates", 200},
		{"/v2/templates", 200},
	} {
		if resp, body := e.call("GET", tc.path, nil); resp.StatusCode != tc.want {
			t.Errorf("GET %s: %d %s, want %d", tc.path, resp.StatusCode, body, tc.want)
		}
	}
	if resp, body = e.call("POST", "/v3/templates", map[string]any{"name": "base"}); resp.StatusCode != http.StatusConflict {
		t.Errorf("name of a built-in template: %d %s, want 409", resp.StatusCode, body)
	}
	if resp, body = e.call("POST", "/v3/templates", map[string]any{"name": strings.Repeat("n", 129)}); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("name of 129 characters: %d %s, want 400", resp.StatusCode, body)
	}
	if resp, body = e.call("DELETE", "/templates/app", nil); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("delete: %d %s", resp.StatusCode, body)
	}
	if resp, _ = e.call("GET", "/templates/aliases/app", nil); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("alias after delete: %d, want 404", resp.StatusCode)
	}
}

// checkUploadNamespaces: a second upload of a hash with other files is
// 409 and keeps the first; another template does not see the upload (its
// client uploads its own files under the same hash).
func checkUploadNamespaces(t *testing.T, e *env, tplID, hash string) {
	t.Helper()
	if resp, body := e.call("PUT", "/templates/"+tplID+"/files/"+hash, string(tarGz(t, "a.txt", "other"))); resp.StatusCode != http.StatusConflict {
		t.Errorf("upload of other files under the hash: %d %s, want 409", resp.StatusCode, body)
	}
	if resp, body := e.call("PUT", "/templates/"+tplID+"/files/"+hash, string(tarGz(t, "a.txt", "hello"))); resp.StatusCode != http.StatusCreated {
		t.Errorf("the same files again: %d %s, want 201", resp.StatusCode, body)
	}
	resp, body := e.call("POST", "/v3/templates", map[string]any{"name": "other"})
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("request build of other: %d %s", resp.StatusCode, body)
	}
	if _, body = e.call("GET", "/templates/other/files/"+hash, nil); !strings.Contains(string(body), `"present":false`) {
		t.Errorf("another template sees the upload: %s", body)
	}
	if resp, body = e.call("PUT", "/templates/other/files/"+hash, string(tarGz(t, "a.txt", "other"))); resp.StatusCode != http.StatusCreated {
		t.Errorf("another template's own upload of the hash: %d %s", resp.StatusCode, body)
	}
	if resp, body = e.call("PUT", "/templates/nosuch/files/"+hash, string(tarGz(t, "a.txt", "x"))); resp.StatusCode != http.StatusNotFound {
		t.Errorf("upload for an unknown template: %d %s, want 404", resp.StatusCode, body)
	}
	if resp, body = e.call("DELETE", "/templates/other", nil); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("delete other: %d %s", resp.StatusCode, body)
	}
}

// checkBuildLogsRoute pages the build logs route (cursor in ms, limit,
// direction, level) over a build whose status route gave all.
func checkBuildLogsRoute(t *testing.T, e *env, path string, all []build.LogEntry) {
	t.Helper()
	if len(all) < 2 {
		t.Fatalf("want a build with 2+ log entries, have %d", len(all))
	}
	get := func(q string) []build.LogEntry {
		resp, body := e.call("GET", path+q, nil)
		var out struct{ Logs []build.LogEntry }
		if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &out) != nil {
			t.Fatalf("GET %s%s: %d %s", path, q, resp.StatusCode, body)
		}
		return out.Logs
	}
	last := all[len(all)-1]
	if got := get(""); len(got) != len(all) {
		t.Errorf("all logs: %d entries, want %d", len(got), len(all))
	}
	if got := get("?limit=1"); len(got) != 1 || got[0].Message != all[0].Message {
		t.Errorf("limit=1: %+v, want the first entry", got)
	}
	if got := get("?direction=backward&limit=1"); len(got) != 1 || got[0].Message != last.Message {
		t.Errorf("backward limit=1: %+v, want the last entry %q", got, last.Message)
	}
	if got := get("?level=error"); len(got) != 1 || got[0].Level != "error" {
		t.Errorf("level=error: %+v, want the one error entry", got)
	}
	cursor := last.Timestamp.UnixMilli()
	for _, e := range get(fmt.Sprintf("?cursor=%d", cursor)) {
		if e.Timestamp.UnixMilli() < cursor {
			t.Errorf("cursor=%d: entry at %d", cursor, e.Timestamp.UnixMilli())
		}
	}
	if got := get(fmt.Sprintf("?cursor=%d&direction=backward", all[0].Timestamp.UnixMilli())); len(got) == 0 || got[0].Message != all[0].Message {
		t.Errorf("backward from the first entry's time: %+v", got)
	}
	if resp, _ := e.call("GET", path+"?limit=-1", nil); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("limit=-1: %d, want 400", resp.StatusCode)
	}
}
