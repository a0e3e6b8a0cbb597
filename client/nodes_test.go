package client_test

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/forkbox/forkbox/client"
	"github.com/forkbox/forkbox/client/clienttest"
)

// TestNodes walks the SDK's node calls against the in-process daemon:
// list (with a dead node), get, drain (a create then fails with 503),
// undrain (creates work again), 404 for an unknown node, and the removal
// of the dead node (a live one is a conflict).
func TestNodes(t *testing.T) {
	srv, c := newFake(t)
	ctx := context.Background()
	srv.AddNode("z-dead", "http://10.0.0.9:3000", false)
	list, err := c.ListNodes(ctx)
	if err != nil || len(list) != 2 {
		t.Fatalf("list: %+v %v", list, err)
	}
	if n := list[0]; n.NodeID != clienttest.NodeID || n.State != client.NodeAlive || !n.Self || n.URL != clienttest.NodeURL || n.Capacity != 100 {
		t.Errorf("this node: %+v", n)
	}
	if n := list[1]; n.NodeID != "z-dead" || n.State != client.NodeDead || n.Self {
		t.Errorf("the dead node: %+v", n)
	}
	if _, err := c.GetNode(ctx, "nope"); !client.IsNotFound(err) {
		t.Errorf("get unknown: %v", err)
	}
	if _, err := c.DrainNode(ctx, "nope"); !client.IsNotFound(err) {
		t.Errorf("drain unknown: %v", err)
	}
	sb, err := c.CreateSandbox(ctx, client.CreateOptions{TemplateID: clienttest.Template})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := c.DrainNode(ctx, clienttest.NodeID); err != nil || n.State != client.NodeDraining || !n.Draining {
		t.Fatalf("drain: %+v %v", n, err)
	}
	var e *client.Error
	if _, err := c.CreateSandbox(ctx, client.CreateOptions{TemplateID: clienttest.Template}); !errors.As(err, &e) || e.Status != http.StatusServiceUnavailable {
		t.Errorf("create on a drained node: %v, want 503", err)
	}
	if n, err := c.GetNode(ctx, clienttest.NodeID); err != nil || n.State != client.NodeDraining {
		t.Errorf("get: %+v %v", n, err)
	}
	if n, err := c.UndrainNode(ctx, clienttest.NodeID); err != nil || n.State != client.NodeAlive {
		t.Fatalf("undrain: %+v %v", n, err)
	}
	if _, err := c.CreateSandbox(ctx, client.CreateOptions{TemplateID: clienttest.Template}); err != nil {
		t.Errorf("create after undrain: %v", err)
	}
	_ = c.KillSandbox(ctx, sb.SandboxID)
	if err := c.RemoveNode(ctx, clienttest.NodeID); !client.IsConflict(err) {
		t.Errorf("remove a live node: %v, want a conflict", err)
	}
	if err := c.RemoveNode(ctx, "z-dead"); err != nil {
		t.Fatalf("remove the dead node: %v", err)
	}
	if err := c.RemoveNode(ctx, "z-dead"); !client.IsNotFound(err) {
		t.Errorf("remove it again: %v, want a 404", err)
	}
	if list, err := c.ListNodes(ctx); err != nil || len(list) != 1 {
		t.Errorf("list after the removal: %+v %v", list, err)
	}
}
