package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/forkbox/forkbox/client"
	"github.com/forkbox/forkbox/internal/daemon/daemontest"
)

// TestDiffCLI: the real forkbox binary's `sandbox diff --json` and
// `--patch` list a fork's changes, `sandbox apply --json` brings them into
// the parent, against a real daemon.
func TestDiffCLI(t *testing.T) {
	d := startDaemon(t)
	ctx, cancel := context.WithTimeout(daemontest.Context(t), 5*time.Minute)
	defer cancel()
	c := client.New(d.URL, d.APIKey)
	src, err := c.CreateSandbox(ctx, client.CreateOptions{TemplateID: "base"})
	if err != nil {
		t.Fatal(err)
	}
	if err := src.Conn().WriteFile(ctx, "/home/user/a.txt", []byte("one\n")); err != nil {
		t.Fatal(err)
	}
	forks, err := c.Fork(ctx, src.SandboxID, 1, 0)
	if err != nil || forks[0].Sandbox == nil {
		t.Fatalf("fork: %v %+v", err, forks)
	}
	f := forks[0].Sandbox
	for p, body := range map[string]string{"/home/user/a.txt": "one\ntwo\n", "/home/user/b.txt": "new\n"} {
		if err := f.Conn().WriteFile(ctx, p, []byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	var changes []client.FileChange
	if err := json.Unmarshal([]byte(mustCLI(t, d, dir, "sandbox", "diff", f.SandboxID, "--path", "/home/user", "--json").stdout), &changes); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ch := range changes {
		got = append(got, ch.Kind+" "+ch.Path)
	}
	if strings.Join(got, ",") != "modified /home/user/a.txt,added /home/user/b.txt" {
		t.Errorf("diff --json: %v", got)
	}
	if out := mustCLI(t, d, dir, "sandbox", "diff", f.SandboxID, src.SandboxID, "--path", "/home/user", "--patch").stdout; !strings.Contains(out, "+two") || !strings.Contains(out, "+++ b/home/user/b.txt") {
		t.Errorf("diff against the source --patch:\n%s", out)
	}
	var res client.ApplyResult
	if err := json.Unmarshal([]byte(mustCLI(t, d, dir, "sandbox", "apply", src.SandboxID, "--from", f.SandboxID, "--json").stdout), &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Applied) != 2 || len(res.Conflicts) != 0 {
		t.Errorf("apply --json: %+v", res)
	}
	if b, err := src.Conn().ReadFile(ctx, "/home/user/b.txt"); err != nil || string(b) != "new\n" {
		t.Errorf("after apply b.txt = %q, %v", b, err)
	}
	if r := forkboxCLI(t, d, dir, "sandbox", "diff", "nosuchsandbox0000000"); r.code == 0 || !strings.Contains(r.stderr, "not found") {
		t.Errorf("diff of an unknown id: exit %d, %s", r.code, r.stderr)
	}
}
