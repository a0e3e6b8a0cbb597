package client_test

import (
	"context"
	"strings"
	"testing"

	"github.com/forkbox/forkbox/client"
)

func TestDiffAndApplyCalls(t *testing.T) {
	srv, c := newFake(t)
	ctx := context.Background()
	sb, err := c.CreateSandbox(ctx, client.CreateOptions{TemplateID: "base"})
	if err != nil {
		t.Fatal(err)
	}
	if err := sb.Conn().WriteFile(ctx, "/work/a.txt", []byte("one\n")); err != nil {
		t.Fatal(err)
	}
	forks, err := c.Fork(ctx, sb.SandboxID, 1, 0)
	if err != nil || forks[0].Sandbox == nil {
		t.Fatalf("fork: %v %+v", err, forks)
	}
	f := forks[0].Sandbox
	if err := f.Conn().WriteFile(ctx, "/work/a.txt", []byte("one\ntwo\n")); err != nil {
		t.Fatal(err)
	}
	if err := f.Conn().WriteFile(ctx, "/work/b.txt", []byte("new\n")); err != nil {
		t.Fatal(err)
	}
	d, err := c.Diff(ctx, f.SandboxID, client.DiffOptions{Paths: []string{"/work"}, Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if q := srv.LastRequest().Query; q != "limit=1&path=%2Fwork" {
		t.Errorf("query %q", q)
	}
	if len(d.Changes) != 1 || d.Changes[0].Path != "/work/a.txt" || d.Changes[0].Kind != client.ChangeModified || d.Next == "" {
		t.Errorf("first page %+v", d)
	}
	all, err := c.DiffAll(ctx, f.SandboxID, client.DiffOptions{Paths: []string{"/work"}, Limit: 1})
	if err != nil || len(all) != 2 || all[1].Path != "/work/b.txt" || all[1].New.SHA256 == "" {
		t.Errorf("all pages %+v %v", all, err)
	}
	patch, _, err := c.DiffPatch(ctx, f.SandboxID, client.DiffOptions{Paths: []string{"/work"}})
	if err != nil || !strings.Contains(patch, "+two") || !strings.Contains(patch, "+++ b/work/b.txt") {
		t.Errorf("patch %q %v", patch, err)
	}
	res, err := c.Apply(ctx, sb.SandboxID, client.ApplyOptions{From: f.SandboxID, DryRun: true})
	if err != nil || len(res.Applied) != 2 || !res.DryRun {
		t.Fatalf("dry run %+v %v", res, err)
	}
	if _, err := sb.Conn().ReadFile(ctx, "/work/b.txt"); err == nil {
		t.Error("a dry run wrote")
	}
	res, err = c.Apply(ctx, sb.SandboxID, client.ApplyOptions{From: f.SandboxID})
	if err != nil || len(res.Applied) != 2 || len(res.Conflicts) != 0 || res.Base == "" {
		t.Fatalf("apply %+v %v", res, err)
	}
	if got, err := sb.Conn().ReadFile(ctx, "/work/a.txt"); err != nil || string(got) != "one\ntwo\n" {
		t.Errorf("applied a.txt %q %v", got, err)
	}
	if _, err := c.Diff(ctx, "nosuchsandbox0000000", client.DiffOptions{}); !client.IsNotFound(err) {
		t.Errorf("unknown id: %v", err)
	}
	if _, err := c.DiffSnapshot(ctx, sb.SandboxID, client.DiffOptions{Against: f.SandboxID}); err != nil {
		t.Errorf("diff between two sandboxes: %v", err)
	}
}
