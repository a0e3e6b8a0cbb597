package sandbox

import (
	"context"
	"testing"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/images"
	"github.com/forkbox/forkbox/internal/runtime"
)

// TestDeleteSnapshotWhileItIsRead deletes a snapshot while a rollback to
// it, or a create from it, is restoring its image (the chaos test saw the
// rollback fail with a 500 when its files vanished mid-read): the
// operation succeeds, the delete succeeds at once (the snapshot is gone
// from the API), and the image goes when the restore is done. An
// operation that starts after the delete gets ErrNotFound.
func TestDeleteSnapshotWhileItIsRead(t *testing.T) {
	for _, tc := range []struct {
		name string
		use  func(e *env, sandboxID, snapID string) error
	}{
		{"rollback", func(e *env, sandboxID, snapID string) error {
			_, err := e.m.Rollback(context.Background(), sandboxID, snapID)
			return err
		}},
		{"create", func(e *env, _, snapID string) error {
			_, err := e.m.Create(context.Background(), CreateRequest{TemplateID: snapID})
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			ctx := context.Background()
			sb := e.create(t, CreateRequest{})
			snap, err := e.m.Snapshot(ctx, sb.ID, SnapshotOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var deleteErr error
			deleted := false
			e.rt.FailRestore = func(spec runtime.Spec, dir string) error {
				if !deleted {
					deleted = true
					deleteErr = e.m.DeleteSnapshot(ctx, snap.ID)
				}
				return nil
			}
			if err := tc.use(e, sb.ID, snap.ID); err != nil {
				t.Fatalf("%s racing a delete of its snapshot: %v", tc.name, err)
			}
			e.rt.FailRestore = nil
			if !deleted || deleteErr != nil {
				t.Fatalf("delete during the restore: ran %v, err %v", deleted, deleteErr)
			}
			if e.hasImage(images.Snapshot(snap.ID)) {
				t.Errorf("the deleted snapshot's image outlived the restore that read it")
			}
			if err := tc.use(e, sb.ID, snap.ID); !errdefs.IsNotFound(err) {
				t.Errorf("%s after the delete: %v, want not found", tc.name, err)
			}
		})
	}
}
