package store

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/forkbox/forkbox/internal/errdefs"
)

// TestNodes: a heartbeat creates a node's row and then replaces its
// report and lease, never its draining flag; drain and undrain; unknown
// nodes are ErrNotFound; listings are by id.
func TestNodes(t *testing.T) { eachBackend(t, testNodes) }

func testNodes(t *testing.T, s *Store) {
	ctx := context.Background()
	if _, err := s.GetNode(ctx, "nope"); !errdefs.IsNotFound(err) {
		t.Fatalf("get unknown: %v", err)
	}
	if _, err := s.SetNodeDraining(ctx, "nope", true); !errdefs.IsNotFound(err) {
		t.Fatalf("drain unknown: %v", err)
	}
	start := time.UnixMilli(1_700_000_000_123).UTC()
	b := &Node{ID: "node-b", URL: "http://b:3000", StartedAt: start, HeartbeatAt: start, LeaseUntil: start.Add(10 * time.Second),
		Report: Report{Capacity: 50, Running: 3, FreeMemoryMiB: 2048, CPUs: 4, Load1: 0.5, Version: "v1",
			Cached: []string{"images/pause/x", "content/layer/y"}}}
	got, err := s.HeartbeatNode(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, b) {
		t.Fatalf("first heartbeat stored %+v, want %+v", got, b)
	}
	if _, err := s.HeartbeatNode(ctx, &Node{ID: "node-a", URL: "http://a:3000", StartedAt: start, HeartbeatAt: start, LeaseUntil: start}); err != nil {
		t.Fatal(err)
	}
	if got, err = s.SetNodeDraining(ctx, "node-b", true); err != nil || !got.Draining || got.Running != 3 {
		t.Fatalf("drain: %+v %v", got, err)
	}
	// The node's next heartbeat (which says nothing of draining) keeps
	// the operator's drain and tells the node about it.
	next := *b
	next.HeartbeatAt, next.LeaseUntil, next.Running = start.Add(2*time.Second), start.Add(12*time.Second), 4
	if got, err = s.HeartbeatNode(ctx, &next); err != nil || !got.Draining || got.Running != 4 || !got.LeaseUntil.Equal(next.LeaseUntil) {
		t.Fatalf("heartbeat of a drained node: %+v %v", got, err)
	}
	list, err := s.ListNodes(ctx)
	if err != nil || len(list) != 2 || list[0].ID != "node-a" || list[1].ID != "node-b" || list[0].Draining || !list[1].Draining {
		t.Fatalf("list: %+v %v", list, err)
	}
	if got, err = s.SetNodeDraining(ctx, "node-b", false); err != nil || got.Draining {
		t.Fatalf("undrain: %+v %v", got, err)
	}
	if got, err = s.GetNode(ctx, "node-b"); err != nil || got.Draining || got.URL != "http://b:3000" || got.CPUs != 4 {
		t.Fatalf("get: %+v %v", got, err)
	}
	// Removal: only of a node whose lease ran out by the time given.
	if err := s.DeleteNode(ctx, "nope", start); !errdefs.IsNotFound(err) {
		t.Fatalf("remove unknown: %v", err)
	}
	if err := s.DeleteNode(ctx, "node-b", next.LeaseUntil.Add(-time.Millisecond)); !errdefs.IsConflict(err) {
		t.Fatalf("remove a node whose lease runs: %v, want a conflict", err)
	}
	if err := s.DeleteNode(ctx, "node-b", next.LeaseUntil); err != nil {
		t.Fatalf("remove a dead node: %v", err)
	}
	if list, err = s.ListNodes(ctx); err != nil || len(list) != 1 || list[0].ID != "node-a" {
		t.Fatalf("list after the removal: %+v %v", list, err)
	}
	if got, err = s.HeartbeatNode(ctx, &next); err != nil || got.Draining || got.Running != 4 {
		t.Fatalf("a removed node's next heartbeat registers it anew: %+v %v", got, err)
	}
}
