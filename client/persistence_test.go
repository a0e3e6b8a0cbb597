package client_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/forkbox/forkbox/client"
)

func TestPersistenceCalls(t *testing.T) {
	srv, c := newFake(t)
	ctx := context.Background()
	sb, err := c.CreateSandbox(ctx, client.CreateOptions{TemplateID: "base"})
	if err != nil {
		t.Fatal(err)
	}
	conn := sb.Conn()
	if err := conn.WriteFile(ctx, "/tmp/v", []byte("v1")); err != nil {
		t.Fatal(err)
	}
	snap, err := c.Snapshot(ctx, sb.SandboxID, "first")
	if err != nil {
		t.Fatal(err)
	}
	if snap.SnapshotID == "" || len(snap.Names) != 1 || string(srv.LastRequest().Body) != `{"name":"first"}` {
		t.Errorf("snapshot = %+v, body %s", snap, srv.LastRequest().Body)
	}
	if err := conn.WriteFile(ctx, "/tmp/v", []byte("v2")); err != nil {
		t.Fatal(err)
	}
	rb, err := c.Rollback(ctx, sb.SandboxID, snap.SnapshotID)
	if err != nil || rb.SandboxID != sb.SandboxID || rb.SnapshotID != snap.SnapshotID {
		t.Fatalf("rollback = %+v, %v", rb, err)
	}
	if got, err := conn.ReadFile(ctx, "/tmp/v"); err != nil || string(got) != "v1" {
		t.Errorf("after rollback read %q, %v; want v1", got, err)
	}

	cl, err := c.Clone(ctx, sb.SandboxID, client.CloneOptions{Count: 2, Strict: true, Timeout: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if cl.Count != 2 || len(cl.Sandboxes) != 2 || cl.SnapshotTemplateID == "" {
		t.Errorf("clone = %+v", cl)
	}
	if b := string(srv.LastRequest().Body); b != `{"count":2,"strict":true,"timeout":600}` {
		t.Errorf("clone body = %s", b)
	}
	if got, err := cl.Sandboxes[0].Conn().ReadFile(ctx, "/tmp/v"); err != nil || string(got) != "v1" {
		t.Errorf("clone read %q, %v", got, err)
	}
	if _, err := c.Clone(ctx, sb.SandboxID, client.CloneOptions{}); err == nil {
		t.Error("clone with count 0 succeeded")
	}

	forks, err := c.Fork(ctx, sb.SandboxID, 1, 0)
	if err != nil || len(forks) != 1 || forks[0].Sandbox == nil || forks[0].Error != nil {
		t.Fatalf("fork = %+v, %v", forks, err)
	}
	if b := string(srv.LastRequest().Body); b != `{"count":1}` {
		t.Errorf("fork body = %s", b)
	}

	list, next, err := c.ListSnapshots(ctx, client.SnapshotListOptions{SandboxID: sb.SandboxID, Limit: 2})
	if err != nil || len(list) != 2 || next == "" {
		t.Errorf("snapshots page 1 = %d items, next %q, %v", len(list), next, err)
	}
	list, next, err = c.ListSnapshots(ctx, client.SnapshotListOptions{SandboxID: sb.SandboxID, Limit: 2, NextToken: next})
	if err != nil || len(list) != 1 || next != "" {
		t.Errorf("snapshots page 2 = %d items, next %q, %v", len(list), next, err)
	}

	root, err := c.Lineage(ctx, cl.Sandboxes[1].SandboxID)
	if err != nil {
		t.Fatal(err)
	}
	if root.ID != sb.SandboxID || root.Kind != client.KindSandbox || len(root.Children) != 3 {
		t.Errorf("lineage root = %+v", root)
	}
	if n := root.Find(cl.Sandboxes[1].SandboxID); n == nil || n.Origin != "clone" || n.ParentID != cl.SnapshotTemplateID {
		t.Errorf("clone node = %+v", n)
	}

	if err := c.DeleteSnapshot(ctx, snap.SnapshotID); err != nil {
		t.Fatal(err)
	}
	if r := srv.LastRequest(); r.Method != "DELETE" || r.Path != "/templates/"+snap.SnapshotID {
		t.Errorf("delete request = %s %s", r.Method, r.Path)
	}
	if err := c.DeleteSnapshot(ctx, snap.SnapshotID); !client.IsNotFound(err) {
		t.Errorf("second delete: %v", err)
	}
}

func TestLineageShapes(t *testing.T) {
	flat := `[{"id":"s1","kind":"sandbox","state":"running"},
		{"id":"p1","kind":"snapshot","parentId":"s1","origin":"snapshot"},
		{"id":"s2","kind":"sandbox","parentId":"p1","origin":"clone"}]`
	tests := []struct {
		name string
		body string
	}{
		{"tree", `{"id":"s1","kind":"sandbox","state":"running","children":[{"id":"p1","kind":"snapshot","parentId":"s1","children":[{"id":"s2","kind":"sandbox","parentId":"p1"}]}]}`},
		{"flat array", flat},
		{"nodes object", `{"nodes":` + flat + `}`},
		{"root object", `{"root":{"id":"s1","kind":"sandbox","children":[{"id":"p1","kind":"snapshot","children":[{"id":"s2","kind":"sandbox"}]}]}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root, err := client.DecodeLineageForTest(json.RawMessage(tt.body), "s2")
			if err != nil {
				t.Fatal(err)
			}
			if root.ID != "s1" || len(root.Children) != 1 || root.Children[0].ID != "p1" || root.Find("s2") == nil {
				t.Errorf("tree = %s", mustJSON(t, root))
			}
		})
	}
}
