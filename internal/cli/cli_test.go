package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/forkbox/forkbox/client"
	"github.com/forkbox/forkbox/client/clienttest"
)

// result is the outcome of one in-process CLI run.
type result struct {
	code           int
	stdout, stderr string
}

// runCLI runs the CLI against srv with the key from the environment.
func runCLI(t *testing.T, srv *clienttest.Server, stdin io.Reader, args ...string) result {
	t.Helper()
	vars := map[string]string{}
	if srv != nil {
		vars["FORKBOX_API_URL"], vars["FORKBOX_API_KEY"] = srv.URL, clienttest.APIKey
	}
	return runEnv(t, vars, "", stdin, args...)
}

func runEnv(t *testing.T, vars map[string]string, keyFile string, stdin io.Reader, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, env{
		stdin: stdin, stdout: &out, stderr: &errb,
		getenv: func(k string) string { return vars[k] }, keyFile: keyFile,
	})
	return result{code, out.String(), errb.String()}
}

// mustJSON runs a command that must succeed and decodes its --json output.
func mustJSON[T any](t *testing.T, srv *clienttest.Server, args ...string) T {
	t.Helper()
	r := runCLI(t, srv, nil, append(args, "--json")...)
	if r.code != 0 {
		t.Fatalf("%v: exit %d: %s", args, r.code, r.stderr)
	}
	var v T
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
		t.Fatalf("%v: output %q: %v", args, r.stdout, err)
	}
	return v
}

func TestSandboxVerbsJSON(t *testing.T) {
	srv := clienttest.NewServer(t)
	sb := mustJSON[client.Sandbox](t, srv, "sandbox", "create", "--template", "base", "--timeout", "60",
		"--metadata", "owner=me", "--env", "A=1", "--auto-pause", "--secure")
	if sb.SandboxID == "" || sb.EnvdAccessToken == "" {
		t.Fatalf("created %+v", sb)
	}
	if got := string(srv.LastRequest().Body); !strings.Contains(got, `"autoPause":true`) || !strings.Contains(got, `"metadata":{"owner":"me"}`) {
		t.Errorf("create body %s", got)
	}
	id := sb.SandboxID
	info := mustJSON[client.SandboxInfo](t, srv, "sandbox", "info", id)
	if info.State != "running" || info.Metadata["owner"] != "me" {
		t.Errorf("info %+v", info)
	}
	list := mustJSON[[]client.SandboxInfo](t, srv, "sandbox", "list", "--state", "running", "--metadata", "owner=me", "--all", "--limit", "1")
	if len(list) != 1 || list[0].SandboxID != id {
		t.Errorf("list %+v", list)
	}
	for _, args := range [][]string{
		{"sandbox", "timeout", id, "120"}, {"sandbox", "refresh", id, "60"}, {"sandbox", "pause", id},
	} {
		if ok := mustJSON[map[string]any](t, srv, args...); ok["ok"] != true {
			t.Errorf("%v: %v", args, ok)
		}
	}
	if r := runCLI(t, srv, nil, "sandbox", "pause", id); r.code != 1 || !strings.HasPrefix(r.stderr, "forkbox: ") || strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("second pause: %+v", r)
	}
	if sb := mustJSON[client.Sandbox](t, srv, "sandbox", "resume", id); sb.SandboxID != id {
		t.Errorf("resume %+v", sb)
	}
	if m := mustJSON[[]client.Metric](t, srv, "sandbox", "metrics", id); len(m) != 1 {
		t.Errorf("metrics %+v", m)
	}
	snap := mustJSON[client.SnapshotInfo](t, srv, "snapshot", "create", id, "--name", "s1")
	clone := mustJSON[client.CloneResult](t, srv, "sandbox", "clone", id, "-c", "2", "--strict", "-t", "600")
	if len(clone.Sandboxes) != 2 || string(srv.LastRequest().Body) != `{"count":2,"strict":true,"timeout":600}` {
		t.Errorf("clone %+v body %s", clone, srv.LastRequest().Body)
	}
	if forks := mustJSON[[]client.ForkResult](t, srv, "sandbox", "fork", id, "-c", "1"); len(forks) != 1 || forks[0].Sandbox == nil {
		t.Errorf("fork %+v", forks)
	}
	if snaps := mustJSON[[]client.SnapshotInfo](t, srv, "snapshot", "list", "--sandbox", id); len(snaps) != 3 {
		t.Errorf("snapshots %+v", snaps)
	}
	if rb := mustJSON[client.RollbackResult](t, srv, "sandbox", "rollback", id, snap.SnapshotID); rb.SnapshotID != snap.SnapshotID {
		t.Errorf("rollback %+v", rb)
	}
	if tree := mustJSON[client.LineageNode](t, srv, "lineage", clone.Sandboxes[0].SandboxID); tree.ID != id || len(tree.Children) != 3 {
		t.Errorf("lineage %+v", tree)
	}
	if del := mustJSON[map[string]any](t, srv, "snapshot", "delete", snap.SnapshotID); del["deleted"] != true {
		t.Errorf("delete %+v", del)
	}
	kills := mustJSON[[]map[string]any](t, srv, "sandbox", "kill", id, clone.Sandboxes[0].SandboxID)
	if len(kills) != 2 || kills[0]["killed"] != true {
		t.Errorf("kill %+v", kills)
	}
}

func TestHumanOutput(t *testing.T) {
	srv := clienttest.NewServer(t)
	id := srv.AddSandbox(client.SandboxInfo{Metadata: map[string]string{"b": "2", "a": "1"}})
	tests := []struct {
		args []string
		want []string
	}{
		{[]string{"sandbox", "list"}, []string{"SANDBOX ID", "STATE", id, "running", "a=1,b=2"}},
		{[]string{"sandbox", "info", id}, []string{"Sandbox ID:", id, "State:", "running"}},
		// The fake runtime reports 32 MiB used; the template has 512.
		{[]string{"sandbox", "metrics", id}, []string{"CPU %", "MEM MiB", "32 / 512"}},
		{[]string{"sandbox", "create"}, []string{"SANDBOX ID", "base", clienttest.EnvdVersion}},
		{[]string{"sandbox", "kill", id}, []string{"killed " + id}},
	}
	for _, tt := range tests {
		r := runCLI(t, srv, nil, tt.args...)
		if r.code != 0 {
			t.Fatalf("%v: %+v", tt.args, r)
		}
		for _, w := range tt.want {
			if !strings.Contains(r.stdout, w) {
				t.Errorf("%v: output lacks %q:\n%s", tt.args, w, r.stdout)
			}
		}
	}
}

func TestErrorsAreOneLine(t *testing.T) {
	srv := clienttest.NewServer(t)
	tests := [][]string{
		{"sandbox", "info", "nope"},
		{"sandbox", "kill", "nope1", "nope2"},
		{"sandbox", "timeout", "x", "soon"},
		{"sandbox", "create", "--metadata", "novalue"},
		{"sandbox", "info"},
		{"no-such-verb"},
	}
	for _, args := range tests {
		r := runCLI(t, srv, nil, args...)
		if r.code != 1 || !strings.HasPrefix(r.stderr, "forkbox: ") || strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("%v: code %d stderr %q", args, r.code, r.stderr)
		}
	}
}

func TestAPIKeyResolution(t *testing.T) {
	srv := clienttest.NewServer(t)
	keyFile := t.TempDir() + "/api-key"
	if err := writeFile(keyFile, clienttest.APIKey+"\n"); err != nil {
		t.Fatal(err)
	}
	good, bad := clienttest.APIKey, "e2b_bad"
	tests := []struct {
		name    string
		vars    map[string]string
		keyFile string
		args    []string
		ok      bool
	}{
		{"flag wins", map[string]string{"FORKBOX_API_KEY": bad}, "", []string{"--api-key", good, "--api-url", srv.URL}, true},
		{"forkbox env", map[string]string{"FORKBOX_API_URL": srv.URL, "FORKBOX_API_KEY": good, "E2B_API_KEY": bad}, "", nil, true},
		{"e2b env", map[string]string{"E2B_API_URL": srv.URL, "E2B_API_KEY": good}, "", nil, true},
		{"key file", map[string]string{"E2B_API_URL": srv.URL}, keyFile, nil, true},
		{"no key", map[string]string{"E2B_API_URL": srv.URL}, "", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runEnv(t, tt.vars, tt.keyFile, nil, append(tt.args, "sandbox", "list")...)
			if (r.code == 0) != tt.ok {
				t.Errorf("code %d, stderr %q", r.code, r.stderr)
			}
		})
	}
}
