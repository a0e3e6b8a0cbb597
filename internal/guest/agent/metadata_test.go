package agent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"mime/multipart"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"github.com/pkg/xattr"

	fspb "github.com/forkbox/forkbox/api/gen/filesystem"
	"github.com/forkbox/forkbox/internal/guest/agent"
)

// uploadedMeta is one entry of a POST /files answer with its metadata.
type uploadedMeta struct {
	Path     string            `json:"path"`
	Metadata map[string]string `json:"metadata"`
}

// postFiles uploads body with the given headers (each header may repeat).
func (ta *testAgent) postFiles(t *testing.T, path, user string, body *bytes.Buffer, hdr http.Header) (int, []uploadedMeta, string) {
	t.Helper()
	q := url.Values{"username": {user}}
	if path != "" {
		q.Set("path", path)
	}
	req, _ := http.NewRequest("POST", ta.url+"/files?"+q.Encode(), body)
	req.Header = hdr
	resp, err := ta.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	buf.ReadFrom(resp.Body)
	var got []uploadedMeta
	_ = json.Unmarshal(buf.Bytes(), &got)
	return resp.StatusCode, got, buf.String()
}

func octetWith(md ...string) http.Header {
	h := http.Header{"Content-Type": {"application/octet-stream"}}
	for i := 0; i+1 < len(md); i += 2 {
		h.Add(md[i], md[i+1])
	}
	return h
}

// TestFileMetadata checks envd 0.6.2's file metadata: X-Metadata-* headers
// become user.e2b.* xattrs, show up in the upload answer, Stat, ListDir
// and Move, are replaced (or cleared) by the next upload, and are validated.
func TestFileMetadata(t *testing.T) {
	dir := ownedDir(t, nobodyUID)
	ta := startAgent(t, agent.Config{})
	ctx := context.Background()
	f := filepath.Join(dir, "doc.txt")
	code, got, body := ta.postFiles(t, f, "nobody", bytes.NewBufferString("x"),
		octetWith("X-Metadata-Author", "mish", "X-Metadata-PURPOSE", "test run", "x-metadata-author", "second"))
	want := map[string]string{"author": "mish", "purpose": "test run"}
	if code != 200 || len(got) != 1 || !maps.Equal(got[0].Metadata, want) {
		t.Fatalf("upload: %d %s, want metadata %v", code, body, want)
	}
	if v, err := xattr.Get(f, "user.e2b.author"); err != nil || string(v) != "mish" {
		t.Errorf("xattr user.e2b.author = %q, %v", v, err)
	}
	// Set inside the sandbox: user.e2b.* is metadata, other user.* is not.
	if err := xattr.Set(f, "user.e2b.tool", []byte("setfattr")); err != nil {
		t.Fatal(err)
	}
	if err := xattr.Set(f, "user.other", []byte("hidden")); err != nil {
		t.Fatal(err)
	}
	want["tool"] = "setfattr"
	st, err := ta.fs.Stat(ctx, asUser(connect.NewRequest(&fspb.StatRequest{Path: f}), "nobody"))
	if err != nil || !maps.Equal(st.Msg.GetEntry().GetMetadata(), want) {
		t.Errorf("Stat metadata = %v, %v; want %v", st.Msg.GetEntry().GetMetadata(), err, want)
	}
	ls, err := ta.fs.ListDir(ctx, connect.NewRequest(&fspb.ListDirRequest{Path: dir}))
	if err != nil || len(ls.Msg.GetEntries()) != 1 || !maps.Equal(ls.Msg.GetEntries()[0].GetMetadata(), want) {
		t.Errorf("ListDir = %v, %v; want metadata %v", ls.Msg.GetEntries(), err, want)
	}
	moved := filepath.Join(dir, "sub", "renamed.txt")
	mv, err := ta.fs.Move(ctx, asUser(connect.NewRequest(&fspb.MoveRequest{Source: f, Destination: moved}), "nobody"))
	if err != nil || !maps.Equal(mv.Msg.GetEntry().GetMetadata(), want) {
		t.Errorf("Move entry metadata = %v, %v; want %v", mv.Msg.GetEntry().GetMetadata(), err, want)
	}
	// A new upload replaces the set; one without headers clears it.
	_, got, body = ta.postFiles(t, moved, "nobody", bytes.NewBufferString("y"), octetWith("X-Metadata-Version", "2"))
	if len(got) != 1 || !maps.Equal(got[0].Metadata, map[string]string{"version": "2"}) {
		t.Errorf("re-upload: %s, want only version=2", body)
	}
	_, got, body = ta.postFiles(t, moved, "nobody", bytes.NewBufferString("z"), octetWith())
	if len(got) != 1 || got[0].Metadata != nil || strings.Contains(body, "metadata") {
		t.Errorf("upload without metadata headers: %s, want no metadata", body)
	}
	if v, _ := xattr.Get(moved, "user.other"); string(v) != "hidden" {
		t.Errorf("an upload removed a non-metadata xattr: %q", v)
	}
}

// TestFileMetadataEmptyValue checks that an empty value round-trips and is
// stored non-empty: runsc's tar of a sandbox's files (a filesystem-only
// pause) drops xattrs with an empty value.
func TestFileMetadataEmptyValue(t *testing.T) {
	dir := ownedDirIn(t, "/dev/shm", nobodyUID)
	ta := startAgent(t, agent.Config{})
	f := filepath.Join(dir, "empty.txt")
	code, got, body := ta.postFiles(t, f, "nobody", bytes.NewBufferString("x"), octetWith("X-Metadata-Empty", "", "X-Metadata-Full", "v"))
	want := map[string]string{"empty": "", "full": "v"}
	if code != 200 || len(got) != 1 || !maps.Equal(got[0].Metadata, want) {
		t.Fatalf("upload: %d %s, want metadata %v", code, body, want)
	}
	if v, err := xattr.Get(f, "user.e2b.empty"); err != nil || len(v) == 0 {
		t.Errorf("xattr user.e2b.empty = %q, %v; want a stored byte that a tar keeps", v, err)
	}
	st, err := ta.fs.Stat(context.Background(), asUser(connect.NewRequest(&fspb.StatRequest{Path: f}), "nobody"))
	if err != nil || !maps.Equal(st.Msg.GetEntry().GetMetadata(), want) {
		t.Errorf("Stat metadata = %v, %v; want %v", st.Msg.GetEntry().GetMetadata(), err, want)
	}
}

// TestFileMetadataMultipart checks that every file of a multipart upload
// gets the request's metadata.
func TestFileMetadataMultipart(t *testing.T) {
	dir := ownedDir(t, nobodyUID)
	ta := startAgent(t, agent.Config{})
	var mp bytes.Buffer
	mw := multipart.NewWriter(&mp)
	for _, name := range []string{"a.txt", "b/c.txt"} {
		fw, _ := mw.CreateFormFile("file", filepath.Join(dir, name))
		fmt.Fprint(fw, name)
	}
	mw.Close()
	h := http.Header{"Content-Type": {mw.FormDataContentType()}, "X-Metadata-Batch": {"7"}}
	code, got, body := ta.postFiles(t, "", "nobody", &mp, h)
	if code != 200 || len(got) != 2 {
		t.Fatalf("multipart upload: %d %s", code, body)
	}
	for _, e := range got {
		if !maps.Equal(e.Metadata, map[string]string{"batch": "7"}) {
			t.Errorf("%s: metadata %v, want batch=7", e.Path, e.Metadata)
		}
	}
}

// TestFileMetadataRules checks envd's limits: printable ASCII, a key of at
// most 246 bytes, 4096 bytes in all. It writes to a tmpfs (/dev/shm), the
// file system of the sandbox's writable layer: ext4 fits less than 4096
// bytes of xattrs into an inode.
func TestFileMetadataRules(t *testing.T) {
	dir := ownedDirIn(t, "/dev/shm", nobodyUID)
	ta := startAgent(t, agent.Config{})
	long := strings.Repeat("k", 246)
	cases := []struct {
		name string
		md   []string
		want int
	}{
		{"longest key", []string{"X-Metadata-" + long, "v"}, 200},
		{"key one byte too long", []string{"X-Metadata-" + long + "k", "v"}, 400},
		{"non-ASCII value", []string{"X-Metadata-Name", "caf\u00e9"}, 400},
		{"all within 4096 bytes", []string{"X-Metadata-A", strings.Repeat("v", 4096-len("user.e2b.a"))}, 200},
		{"over 4096 bytes in all", []string{"X-Metadata-A", strings.Repeat("v", 2048), "X-Metadata-B", strings.Repeat("v", 2048)}, 400},
	}
	for i, tc := range cases {
		p := filepath.Join(dir, fmt.Sprintf("f%d", i))
		code, _, body := ta.postFiles(t, p, "nobody", bytes.NewBufferString("x"), octetWith(tc.md...))
		if code != tc.want {
			t.Errorf("%s: %d %s, want %d", tc.name, code, body, tc.want)
		}
		if tc.want == 400 && !strings.Contains(body, `"code":400`) {
			t.Errorf("%s: body %s is not envd's JSON error", tc.name, body)
		}
	}
}
