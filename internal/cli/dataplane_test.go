package cli

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/forkbox/forkbox/client"
	"github.com/forkbox/forkbox/client/clienttest"
)

func writeFile(path, content string) error { return os.WriteFile(path, []byte(content), 0o600) }

func TestExec(t *testing.T) {
	srv := clienttest.NewServer(t)
	sb := mustJSON[client.Sandbox](t, srv, "sandbox", "create", "--secure")
	tests := []struct {
		name        string
		args        []string
		stdin       string
		code        int
		out, errOut string
	}{
		{"argv", []string{"--", "echo", "hi", "there"}, "", 0, "hi there\n", ""},
		{"exit code", []string{"--shell", "echo a; echoerr b; exit 7"}, "", 7, "a\n", "b\n"},
		{"stdin", []string{"--", "cat"}, "in\n", 0, "in\n", ""},
		{"no stdin", []string{"--no-stdin", "--", "cat"}, "in\n", 0, "", ""},
		{"user cwd env", []string{"-u", "root", "-w", "/tmp", "-e", "X=y", "-s", "whoami; pwd; printenv X"}, "", 0, "root\n/tmp\ny\n", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runCLI(t, srv, strings.NewReader(tt.stdin), append([]string{"exec", sb.SandboxID}, tt.args...)...)
			if r.code != tt.code || r.stdout != tt.out || r.stderr != tt.errOut {
				t.Errorf("got %+v, want code %d out %q err %q", r, tt.code, tt.out, tt.errOut)
			}
		})
	}
	if r := runCLI(t, srv, nil, "exec", "missing", "--", "true"); r.code != 1 || !strings.HasPrefix(r.stderr, "forkbox: ") {
		t.Errorf("exec on missing sandbox: %+v", r)
	}
}

func TestFiles(t *testing.T) {
	srv := clienttest.NewServer(t)
	id := srv.AddSandbox(client.SandboxInfo{})
	local := t.TempDir() + "/local.txt"
	if err := writeFile(local, "from file"); err != nil {
		t.Fatal(err)
	}
	if r := runCLI(t, srv, strings.NewReader("from stdin"), "files", "write", id, "/w/a.txt"); r.code != 0 {
		t.Fatalf("write stdin: %+v", r)
	}
	if r := runCLI(t, srv, nil, "files", "write", id, "/w/sub/b.txt", "--from", local); r.code != 0 {
		t.Fatalf("write file: %+v", r)
	}
	r := runCLI(t, srv, strings.NewReader("m"), "files", "write", id, "/w/m.txt", "--metadata", "Author=me", "-m", "purpose=demo", "--json")
	var wrote struct {
		Path     string            `json:"path"`
		Metadata map[string]string `json:"metadata"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &wrote); err != nil || wrote.Metadata["author"] != "me" || wrote.Metadata["purpose"] != "demo" {
		t.Fatalf("write --metadata --json: %+v (%v)", r, err)
	}
	if r := runCLI(t, srv, nil, "files", "read", id, "/w/a.txt"); r.stdout != "from stdin" {
		t.Errorf("read: %+v", r)
	}
	var entries []client.EntryInfo
	r = runCLI(t, srv, nil, "files", "ls", id, "/w", "--depth", "2", "--json")
	if err := json.Unmarshal([]byte(r.stdout), &entries); err != nil || len(entries) != 4 {
		t.Fatalf("ls --json: %+v (%v)", r, err)
	}
	if r := runCLI(t, srv, nil, "files", "ls", id, "/w"); !strings.Contains(r.stdout, "/w/sub") || !strings.Contains(r.stdout, "PATH") {
		t.Errorf("ls: %+v", r)
	}
	if r := runCLI(t, srv, nil, "files", "read", id, "/nope"); r.code != 1 {
		t.Errorf("read missing: %+v", r)
	}
}
