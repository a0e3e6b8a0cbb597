package sandbox

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/forkbox/forkbox/internal/images"
	"github.com/forkbox/forkbox/internal/store"
)

// layeredTemplate stores template "app" running on a layer of the Manager's
// content store, held by the template (as the build service holds a
// built template's), and returns the layer.
func layeredTemplate(t *testing.T, e *env) images.ContentRef {
	t.Helper()
	ctx := context.Background()
	layer := images.Layer(strings.Repeat("c", 64))
	dir, err := e.m.content.Create(ctx, layer)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "marker"), []byte("app"), 0o644)
	tplHolder := images.Holder{Kind: images.HolderTemplate, ID: "app"}
	if err := e.m.content.Commit(ctx, layer, dir, tplHolder); err != nil {
		t.Fatal(err)
	}
	if err := e.st.PutTemplate(ctx, &store.Template{ID: "app", Kind: store.KindTemplate, Content: []images.ContentRef{layer}, CPUCount: 1, MemoryMB: 256}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.content.Collect(ctx); err != nil { // the daemon's start-up collection
		t.Fatal(err)
	}
	return layer
}

// deleteTemplate deletes template "app" as the build service does.
func deleteTemplate(t *testing.T, e *env) {
	t.Helper()
	ctx := context.Background()
	if err := e.st.DeleteTemplate(ctx, "app"); err != nil {
		t.Fatal(err)
	}
	if err := e.m.content.Release(ctx, images.Holder{Kind: images.HolderTemplate, ID: "app"}); err != nil {
		t.Fatal(err)
	}
}

func (e *env) hasContent(ref images.ContentRef) bool {
	_, err := e.m.content.Open(context.Background(), ref)
	return err == nil
}

// TestContentHeldBySandboxesAndSnapshots: a sandbox runs on its template's
// layer (opened through the content store), holds it through the
// template's deletion, and so does a snapshot of it; the layer goes the
// moment the last of them — the snapshot's deletion here — lets go.
func TestContentHeldBySandboxesAndSnapshots(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	layer := layeredTemplate(t, e)
	sb := e.create(t, CreateRequest{TemplateID: "app"})
	e.count(t, sb.ID)
	deleteTemplate(t, e)
	if !e.hasContent(layer) {
		t.Fatal("the layer a sandbox runs on went with its template")
	}
	snap, err := e.m.Snapshot(ctx, sb.ID, SnapshotOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.m.Kill(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	if !e.hasContent(layer) {
		t.Fatal("the layer a snapshot holds went with the snapshot's sandbox")
	}
	from := e.create(t, CreateRequest{TemplateID: snap.ID})
	if n := e.count(t, from.ID); n != 2 {
		t.Errorf("a sandbox started from the snapshot counts %d, want 2", n)
	}
	if err := e.m.Kill(ctx, from.ID); err != nil {
		t.Fatal(err)
	}
	if !e.hasContent(layer) {
		t.Fatal("the layer went while the snapshot holds it")
	}
	if err := e.m.DeleteSnapshot(ctx, snap.ID); err != nil {
		t.Fatal(err)
	}
	if e.hasContent(layer) {
		t.Error("the layer stayed after its last holder, the snapshot, was deleted")
	}
	if _, err := e.m.Create(ctx, CreateRequest{TemplateID: snap.ID}); err == nil {
		t.Error("a deleted snapshot started a sandbox")
	}
}

// TestContentOfADeletedTemplateRefused: a create from a template whose
// layer is gone fails cleanly, holding nothing and leaving no sandbox.
func TestContentOfADeletedTemplateRefused(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	layer := layeredTemplate(t, e)
	if err := e.m.content.Release(ctx, images.Holder{Kind: images.HolderTemplate, ID: "app"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.Create(ctx, CreateRequest{TemplateID: "app"}); err == nil {
		t.Fatal("a create from a template whose layer is gone succeeded")
	}
	if refs, _ := e.m.content.References(ctx); len(refs) != 0 || e.hasContent(layer) {
		t.Errorf("after the failed create: references %v, layer %v", refs, e.hasContent(layer))
	}
	if ids := e.runtimeIDs(t); len(ids) != 0 {
		t.Errorf("the failed create left %v in the runtime", ids)
	}
}

// TestContentHeldAgainAfterRestart: a restarted Manager (a new content
// store on the same directory) holds what its live sandboxes and its
// snapshots run on, from their records, so the start-up collection keeps
// it; a killed sandbox's record holds nothing.
func TestContentHeldAgainAfterRestart(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	layer := layeredTemplate(t, e)
	sb := e.create(t, CreateRequest{TemplateID: "app"})
	snap, err := e.m.Snapshot(ctx, sb.ID, SnapshotOptions{})
	if err != nil {
		t.Fatal(err)
	}
	deleteTemplate(t, e)
	content, err := images.OpenContent(e.m.cfg.ImageDir)
	if err != nil {
		t.Fatal(err)
	}
	m2, err := New(Config{Runtime: e.rt, Store: e.st, Images: e.m.img, ImageDir: e.m.cfg.ImageDir, Logger: e.m.log, AgentArgs: []string{"/agent"}})
	if err != nil {
		t.Fatal(err)
	}
	m2.content = content
	if err := m2.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	e.m = m2
	if _, err := content.Collect(ctx); err != nil {
		t.Fatal(err)
	}
	if !e.hasContent(layer) {
		t.Fatal("the restart collected a layer a live sandbox and a snapshot run on")
	}
	if err := e.m.Kill(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	if err := e.m.DeleteSnapshot(ctx, snap.ID); err != nil {
		t.Fatal(err)
	}
	if e.hasContent(layer) {
		t.Error("after the restart the last holder's release left the layer")
	}
}
