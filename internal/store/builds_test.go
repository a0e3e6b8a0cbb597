package store

import (
	"context"
	"errors"
	"testing"

	"github.com/forkbox/forkbox/internal/errdefs"
)

func TestBuildRecords(t *testing.T) { eachBackend(t, testBuildRecords) }

func testBuildRecords(t *testing.T, s *Store) {
	ctx := context.Background()
	a := &BuildRecord{ID: "t1", Name: "alpha", Node: "node-a", Data: []byte(`{"v":1}`)}
	if err := s.PutBuildRecord(ctx, a); err != nil {
		t.Fatal(err)
	}
	a.Data = []byte(`{"v":2}`)
	if err := s.PutBuildRecord(ctx, a); err != nil {
		t.Fatalf("its home rewrites it: %v", err)
	}
	if err := s.PutBuildRecord(ctx, &BuildRecord{ID: "t2", Name: "alpha", Node: "node-b", Data: []byte(`{}`)}); !errors.Is(err, errdefs.ErrAlreadyExists) {
		t.Errorf("a second record named alpha: %v, want already exists", err)
	}
	if err := s.PutBuildRecord(ctx, &BuildRecord{ID: "t1", Name: "alpha", Node: "node-b", Data: []byte(`{}`)}); !errors.Is(err, errdefs.ErrConflict) {
		t.Errorf("another node writes t1: %v, want conflict", err)
	}
	for _, ref := range []string{"t1", "alpha"} {
		got, err := s.GetBuildRecord(ctx, ref)
		if err != nil || got.ID != "t1" || got.Node != "node-a" || string(got.Data) != `{"v":2}` || got.Logs != nil {
			t.Errorf("get %s: %+v %v", ref, got, err)
		}
	}
	if logs, err := s.BuildRecordLogs(ctx, "t1"); err != nil || logs != nil {
		t.Errorf("logs of a record written without: %q %v", logs, err)
	}
	a.Logs = []byte(`{"b1":["x"]}`)
	if err := s.PutBuildRecord(ctx, a); err != nil {
		t.Fatal(err)
	}
	if logs, err := s.BuildRecordLogs(ctx, "t1"); err != nil || string(logs) != `{"b1":["x"]}` {
		t.Errorf("logs: %q %v", logs, err)
	}
	if list, err := s.ListBuildRecords(ctx); err != nil || len(list) != 1 || list[0].Logs != nil {
		t.Errorf("a listing leaves the logs out: %+v %v", list, err)
	}
	if _, err := s.BuildRecordLogs(ctx, "nope"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("logs of nope: %v", err)
	}
	if _, err := s.GetBuildRecord(ctx, "nope"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("get nope: %v", err)
	}
	if _, err := s.MoveBuildRecord(ctx, "t1", "node-x", "node-b"); !errors.Is(err, errdefs.ErrConflict) {
		t.Errorf("move from a node that is not its home: %v", err)
	}
	moved, err := s.MoveBuildRecord(ctx, "t1", "node-a", "node-b")
	if err != nil || moved.Node != "node-b" {
		t.Fatalf("move: %+v %v", moved, err)
	}
	if err := s.PutBuildRecord(ctx, a); !errors.Is(err, errdefs.ErrConflict) {
		t.Errorf("the old home writes after the move: %v, want conflict", err)
	}
	if err := s.DeleteBuildRecord(ctx, "t1", "node-a"); !errors.Is(err, errdefs.ErrConflict) {
		t.Errorf("the old home deletes: %v, want conflict", err)
	}
	if err := s.PutBuildRecord(ctx, &BuildRecord{ID: "t3", Name: "beta", Node: "node-a", Data: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if rs, err := s.ListBuildRecords(ctx); err != nil || len(rs) != 2 || rs[0].Name != "alpha" || rs[1].Name != "beta" {
		t.Errorf("list: %v %v", rs, err)
	}
	for range 2 {
		if err := s.DeleteBuildRecord(ctx, "t1", "node-b"); err != nil {
			t.Errorf("delete by its home: %v", err)
		}
	}
	if _, err := s.GetBuildRecord(ctx, "alpha"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("get after delete: %v", err)
	}
}
