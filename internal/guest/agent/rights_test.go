package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"connectrpc.com/connect"

	fspb "github.com/forkbox/forkbox/api/gen/filesystem"
	"github.com/forkbox/forkbox/internal/guest/agent"
)

// TestUserRights checks that the files API and the filesystem service act
// with the named user's rights: nobody cannot touch root's files, directly
// or through a symlink it owns, and root can; a permission error answers
// 403 with envd's JSON body on HTTP and permission_denied on Connect.
func TestUserRights(t *testing.T) {
	ta := startAgent(t, agent.Config{})
	ctx := context.Background()
	sys := rootDir(t, 0o755)               // like /etc
	secret := rootDir(t, 0o700)            // like /root
	mine := ownedDir(t, nobodyUID)         // like /home/user
	shadow := filepath.Join(sys, "shadow") // root's, world-readable
	mustWrite(t, shadow, "root-secret")
	mustWrite(t, filepath.Join(secret, "key"), "k")
	if err := os.Symlink(shadow, filepath.Join(mine, "lnk")); err != nil {
		t.Fatal(err)
	}
	octet := map[string]string{"Content-Type": "application/octet-stream"}
	upload := func(path, user string) (int, string) {
		q := "/files?" + url.Values{"path": {path}, "username": {user}}.Encode()
		code, body := ta.do(t, "POST", q, strings.NewReader("written by "+user), octet)
		return code, string(body)
	}
	httpCases := []struct {
		name, path, user string
		want             int
	}{
		{"user into a root directory", filepath.Join(sys, "new"), "nobody", 403},
		{"user through its symlink to a root file", filepath.Join(mine, "lnk"), "nobody", 403},
		{"user into a new subdirectory of root's", filepath.Join(sys, "d", "f"), "nobody", 403},
		{"user into its own directory", filepath.Join(mine, "ok"), "nobody", 200},
		{"root into a root directory", filepath.Join(sys, "new"), "root", 200},
	}
	for _, tc := range httpCases {
		code, body := upload(tc.path, tc.user)
		if code != tc.want {
			t.Errorf("%s: %d %s, want %d", tc.name, code, body, tc.want)
		}
		if code == 403 {
			var e struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			}
			if json.Unmarshal([]byte(body), &e) != nil || e.Code != 403 || !strings.Contains(e.Message, "permission denied") {
				t.Errorf("%s: body %s is not envd's {code, message}", tc.name, body)
			}
		}
	}
	if b, _ := os.ReadFile(shadow); string(b) != "root-secret" {
		t.Fatalf("root's file was overwritten through the symlink: %q", b)
	}
	if _, err := os.Stat(filepath.Join(sys, "d")); !os.IsNotExist(err) {
		t.Errorf("nobody's failed upload created %s/d: %v", sys, err)
	}
	if code, body := ta.do(t, "GET", "/files?"+url.Values{"path": {filepath.Join(secret, "key")}, "username": {"nobody"}}.Encode(), nil, nil); code != 403 {
		t.Errorf("nobody read a file in root's 0700 directory: %d %s", code, body)
	}
	// root writes through the same symlink.
	if code, body := upload(filepath.Join(mine, "lnk"), "root"); code != 200 {
		t.Errorf("root through the symlink: %d %s", code, body)
	}
	checkRPCRights(ctx, t, ta, sys, secret, mine)
}

// checkRPCRights drives the filesystem service as nobody and as root.
func checkRPCRights(ctx context.Context, t *testing.T, ta *testAgent, sys, secret, mine string) {
	calls := []struct {
		name string
		call func(user string) error // denied to nobody, allowed to root
	}{
		{"MakeDir in root's directory", func(u string) error {
			_, err := ta.fs.MakeDir(ctx, asUser(connect.NewRequest(&fspb.MakeDirRequest{Path: filepath.Join(sys, "dir-"+u)}), u))
			return err
		}},
		{"Stat in root's 0700 directory", func(u string) error {
			_, err := ta.fs.Stat(ctx, asUser(connect.NewRequest(&fspb.StatRequest{Path: filepath.Join(secret, "key")}), u))
			return err
		}},
		{"ListDir of root's 0700 directory", func(u string) error {
			_, err := ta.fs.ListDir(ctx, asUser(connect.NewRequest(&fspb.ListDirRequest{Path: secret}), u))
			return err
		}},
		{"Move root's file into the user's directory", func(u string) error {
			src := filepath.Join(sys, "mv-"+u)
			mustWrite(t, src, "m")
			_, err := ta.fs.Move(ctx, asUser(connect.NewRequest(&fspb.MoveRequest{Source: src, Destination: filepath.Join(mine, "mv-"+u)}), u))
			return err
		}},
		{"Remove root's file", func(u string) error {
			p := filepath.Join(sys, "rm-"+u)
			mustWrite(t, p, "r")
			_, err := ta.fs.Remove(ctx, asUser(connect.NewRequest(&fspb.RemoveRequest{Path: p}), u))
			if err == nil {
				if _, serr := os.Stat(p); !os.IsNotExist(serr) {
					t.Errorf("Remove as %s succeeded but %s remains", u, p)
				}
			}
			return err
		}},
	}
	for _, c := range calls {
		if err := c.call("nobody"); connect.CodeOf(err) != connect.CodePermissionDenied {
			t.Errorf("%s as nobody: %v, want permission_denied", c.name, err)
		}
		if err := c.call("root"); err != nil {
			t.Errorf("%s as root: %v", c.name, err)
		}
	}
	resp, err := ta.fs.MakeDir(ctx, asUser(connect.NewRequest(&fspb.MakeDirRequest{Path: filepath.Join(mine, "a", "b")}), "nobody"))
	if err != nil || resp.Msg.GetEntry().GetOwner() != "nobody" {
		t.Errorf("MakeDir in the user's own directory: %v %v", resp, err)
	}
}

// rootDir makes a directory owned by root with the given mode.
func rootDir(t *testing.T, mode os.FileMode) string {
	t.Helper()
	dir := ownedDir(t, 0)
	if err := os.Chmod(dir, mode); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestUserRightsDoNotLeak runs nobody's and root's uploads concurrently:
// the credentials of nobody's threads must never reach root's requests (or
// the reverse), as they would if a switched thread were reused.
func TestUserRightsDoNotLeak(t *testing.T) {
	ta := startAgent(t, agent.Config{})
	sys := rootDir(t, 0o755)
	const n = 40
	codes := make(chan string, 2*n)
	for i := range n {
		for _, user := range []string{"nobody", "root"} {
			go func() {
				q := "/files?" + url.Values{"path": {filepath.Join(sys, fmt.Sprintf("%s-%d", user, i))}, "username": {user}}.Encode()
				resp, err := ta.http.Post(ta.url+q, "application/octet-stream", strings.NewReader("x"))
				if err != nil {
					codes <- fmt.Sprintf("%s %v", user, err)
					return
				}
				resp.Body.Close()
				codes <- fmt.Sprintf("%s %d", user, resp.StatusCode)
			}()
		}
	}
	for range 2 * n {
		if got := <-codes; got != "nobody 403" && got != "root 200" {
			t.Errorf("concurrent upload: %s", got)
		}
	}
	if os.Geteuid() != 0 {
		t.Errorf("the test process lost root: euid %d", os.Geteuid())
	}
}
