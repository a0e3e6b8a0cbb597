package cli

import (
	"context"
	"strings"
	"testing"

	"github.com/forkbox/forkbox/client"
	"github.com/forkbox/forkbox/client/clienttest"
)

func TestDiffAndApplyVerbs(t *testing.T) {
	srv := clienttest.NewServer(t)
	c := client.New(srv.URL, clienttest.APIKey)
	ctx := context.Background()
	sb, err := c.CreateSandbox(ctx, client.CreateOptions{TemplateID: "base"})
	if err != nil {
		t.Fatal(err)
	}
	forks, err := c.Fork(ctx, sb.SandboxID, 1, 0)
	if err != nil || forks[0].Sandbox == nil {
		t.Fatalf("fork: %v %+v", err, forks)
	}
	f := forks[0].Sandbox.SandboxID
	if err := forks[0].Sandbox.Conn().WriteFile(ctx, "/work/new.txt", []byte("hello\n")); err != nil {
		t.Fatal(err)
	}
	changes := mustJSON[[]client.FileChange](t, srv, "sandbox", "diff", f, "--path", "/work")
	if len(changes) != 2 || changes[1].Path != "/work/new.txt" || changes[1].Kind != "added" {
		t.Errorf("diff --json: %+v", changes)
	}
	if r := runCLI(t, srv, nil, "sandbox", "diff", f, "--path", "/work"); r.code != 0 || !strings.Contains(r.stdout, "A  /work/new.txt") {
		t.Errorf("diff: %d %q %s", r.code, r.stdout, r.stderr)
	}
	if r := runCLI(t, srv, nil, "sandbox", "diff", f, "--patch", "--path", "/work"); r.code != 0 || !strings.Contains(r.stdout, "+hello") {
		t.Errorf("diff --patch: %d %q %s", r.code, r.stdout, r.stderr)
	}
	res := mustJSON[client.ApplyResult](t, srv, "sandbox", "apply", sb.SandboxID, "--from", f)
	if len(res.Applied) != 2 || res.Base == "" {
		t.Errorf("apply --json: %+v", res)
	}
	if r := runCLI(t, srv, nil, "sandbox", "apply", sb.SandboxID, "--from", f); r.code != 0 || !strings.Contains(r.stdout, "applied 0 changes") {
		t.Errorf("apply again: %d %q %s", r.code, r.stdout, r.stderr)
	}
	if r := runCLI(t, srv, nil, "sandbox", "diff", "nosuchsandbox0000000"); r.code == 0 || !strings.Contains(r.stderr, "not found") {
		t.Errorf("diff of an unknown id: %d %q", r.code, r.stderr)
	}
}
