package agent_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"mime/multipart"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	pb "github.com/forkbox/forkbox/api/gen/process"
	"github.com/forkbox/forkbox/internal/guest/agent"
)

// do sends a request and returns status and body.
func (ta *testAgent) do(t *testing.T, method, path string, body io.Reader, hdr map[string]string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, ta.url+path, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := ta.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

type uploaded struct {
	Path, Name, Type string
}

func TestFilesUploadDownload(t *testing.T) {
	dir := ownedDir(t, nobodyUID)
	ta := startAgent(t, agent.Config{})
	q := func(p, user string) string {
		return "/files?" + url.Values{"path": {p}, "username": {user}}.Encode()
	}

	// Raw octet-stream upload into a directory that does not exist yet.
	raw := filepath.Join(dir, "raw", "deep", "file.bin")
	code, body := ta.do(t, "POST", q(raw, "nobody"), strings.NewReader("raw-bytes"),
		map[string]string{"Content-Type": "application/octet-stream"})
	var got []uploaded
	if code != 200 || json.Unmarshal(body, &got) != nil || len(got) != 1 || got[0].Path != raw || got[0].Type != "file" {
		t.Fatalf("octet upload: %d %s", code, body)
	}
	if ownerUID(t, raw) != nobodyUID || ownerUID(t, filepath.Join(dir, "raw")) != nobodyUID {
		t.Errorf("uploaded file or created parent not owned by nobody")
	}

	// Multipart with two files named by their part filenames.
	var mp bytes.Buffer
	mw := multipart.NewWriter(&mp)
	for i, name := range []string{filepath.Join(dir, "m1.txt"), filepath.Join(dir, "sub", "m2.txt")} {
		fw, _ := mw.CreateFormFile("file", name)
		fmt.Fprintf(fw, "content-%d", i)
	}
	mw.Close()
	code, body = ta.do(t, "POST", "/files", &mp, map[string]string{"Content-Type": mw.FormDataContentType()})
	got = nil
	if code != 200 || json.Unmarshal(body, &got) != nil || len(got) != 2 || got[1].Name != "m2.txt" {
		t.Fatalf("multipart upload: %d %s", code, body)
	}

	downloads := []struct {
		path     string
		wantCode int
		want     string
	}{
		{raw, 200, "raw-bytes"},
		{filepath.Join(dir, "sub", "m2.txt"), 200, "content-1"},
		{filepath.Join(dir, "missing"), 404, ""},
		{dir, 400, ""},
	}
	for _, tc := range downloads {
		code, body := ta.do(t, "GET", q(tc.path, ""), nil, nil)
		if code != tc.wantCode || (tc.want != "" && string(body) != tc.want) {
			t.Errorf("GET %s = %d %q, want %d %q", tc.path, code, body, tc.wantCode, tc.want)
		}
		if code == 404 && !strings.Contains(string(body), `"code":404`) {
			t.Errorf("404 body %s is not envd's JSON error", body)
		}
	}
}

func TestInitAndAccessToken(t *testing.T) {
	ta := startAgent(t, agent.Config{})
	const token = "secret-token"
	init := `{"envVars":{"FROM_INIT":"yes"},"accessToken":"` + token + `","defaultUser":"nobody","timestamp":"2026-01-01T00:00:00Z"}`
	if code, body := ta.do(t, "POST", "/init", strings.NewReader(init), nil); code != 204 {
		t.Fatalf("POST /init = %d %s", code, body)
	}
	withToken := map[string]string{"X-Access-Token": token}
	checks := []struct {
		name   string
		method string
		path   string
		hdr    map[string]string
		want   int
	}{
		{"health stays open", "GET", "/health", nil, 204},
		{"envs without token", "GET", "/envs", nil, 401},
		{"envs wrong token", "GET", "/envs", map[string]string{"X-Access-Token": "nope"}, 401},
		{"envs with token", "GET", "/envs", withToken, 200},
		{"metrics with token", "GET", "/metrics", withToken, 200},
		{"files without token", "GET", "/files?path=/etc/hostname", nil, 401},
	}
	for _, tc := range checks {
		if code, body := ta.do(t, tc.method, tc.path, nil, tc.hdr); code != tc.want {
			t.Errorf("%s: %d %s, want %d", tc.name, code, body, tc.want)
		}
	}
	_, body := ta.do(t, "GET", "/envs", nil, withToken)
	if !strings.Contains(string(body), `"FROM_INIT":"yes"`) {
		t.Errorf("/envs = %s", body)
	}
	_, body = ta.do(t, "GET", "/metrics", nil, withToken)
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil || m["mem_total"] == nil || m["mem_cache"] == nil || m["disk_total"] == nil || m["cpu_count"] == nil {
		t.Errorf("/metrics = %s", body)
	}

	// Connect calls need the token too; the default user is now nobody.
	ctx := context.Background()
	_, err := ta.proc.List(ctx, connect.NewRequest(&pb.ListRequest{}))
	if connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Errorf("List without token: %v, want unauthenticated", err)
	}
	req := connect.NewRequest(shell(`echo "$(id -un) $FROM_INIT"`))
	req.Header().Set("X-Access-Token", token)
	if res := ta.runProcess(t, req); res.stdout != "nobody yes\n" {
		t.Errorf("process after init printed %q, want %q", res.stdout, "nobody yes\n")
	}
}

func TestSignedFileURLs(t *testing.T) {
	dir := t.TempDir()
	ta := startAgent(t, agent.Config{AccessToken: "tok"})
	path := filepath.Join(dir, "signed.txt")
	sign := func(op, user string, exp int64) url.Values {
		raw := path + ":" + op + ":" + user + ":tok"
		v := url.Values{"path": {path}}
		if user != "" {
			v.Set("username", user)
		}
		if exp != 0 {
			raw += ":" + strconv.FormatInt(exp, 10)
			v.Set("signature_expiration", strconv.FormatInt(exp, 10))
		}
		sum := sha256.Sum256([]byte(raw))
		v.Set("signature", "v1_"+base64.RawStdEncoding.EncodeToString(sum[:]))
		return v
	}
	future := time.Now().Add(time.Minute).Unix()
	past := time.Now().Add(-time.Minute).Unix()
	forged := sign("read", "", past)
	forged.Set("signature_expiration", strconv.FormatInt(past-1, 10))
	cases := []struct {
		name   string
		method string
		query  url.Values
		hdr    map[string]string
		want   int
		msg    string // envd's exact message for a 401
	}{
		{"signed upload", "POST", sign("write", "root", 0), nil, 200, ""},
		{"signed download with expiry", "GET", sign("read", "", future), nil, 200, ""},
		{"read signature used to write", "POST", sign("read", "", 0), nil, 401, "invalid signature"},
		{"expired", "GET", sign("read", "", past), nil, 401, "signature is already expired"},
		{"expired and forged: the signature is checked first", "GET", forged, nil, 401, "invalid signature"},
		{"no signature", "GET", url.Values{"path": {path}}, nil, 401, "missing signature query parameter"},
		{"wrong token in the header", "GET", sign("read", "", future), map[string]string{"X-Access-Token": "nope"},
			401, "access token present in header but does not match"},
		{"right token in the header, no signature", "GET", url.Values{"path": {path}}, map[string]string{"X-Access-Token": "tok"}, 200, ""},
	}
	for _, tc := range cases {
		hdr := map[string]string{"Content-Type": "application/octet-stream"}
		maps.Copy(hdr, tc.hdr)
		code, body := ta.do(t, tc.method, "/files?"+tc.query.Encode(), strings.NewReader("signed"), hdr)
		if code != tc.want {
			t.Errorf("%s: %d %s, want %d", tc.name, code, body, tc.want)
		}
		if tc.msg != "" {
			want := fmt.Sprintf(`{"code":401,"message":%q}`, tc.msg)
			if strings.TrimSpace(string(body)) != want {
				t.Errorf("%s: body %s, want %s", tc.name, body, want)
			}
		}
	}
}
