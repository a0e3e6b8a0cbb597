package sandbox

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/forkbox/forkbox/internal/eventlog"
	"github.com/forkbox/forkbox/internal/runtime"
	"github.com/forkbox/forkbox/internal/store"
)

// The event log collection keeps the logs of live sandboxes and, for
// DefaultDeadLogRetention, of sandboxes that died on their own; it removes
// the logs of ids without a record (an orphan logged about on its way out),
// of killed sandboxes (a line that outran the kill's own removal), and of
// deaths older than the retention.
func TestCollectEventLogs(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	live := e.create(t, CreateRequest{})
	killed := e.create(t, CreateRequest{})
	died := e.create(t, CreateRequest{})
	if err := e.m.Kill(ctx, killed.ID); err != nil {
		t.Fatal(err)
	}
	if err := e.killWatched(t, died.ID, runtime.ExitCrashed); err != nil {
		t.Fatal(err)
	}
	waitDescribed(t, e, died.ID)
	late := eventlog.Event{Time: time.Now(), Level: eventlog.LevelInfo, Message: "late"}
	for _, id := range []string{killed.ID, "orphan00000000000000"} {
		if err := e.m.cfg.Events.Append(id, late); err != nil {
			t.Fatal(err)
		}
	}
	e.m.collectEventLogs(ctx)
	ids, err := e.m.cfg.Events.IDs()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{live.ID, died.ID}
	slices.Sort(want)
	if !slices.Equal(ids, want) {
		t.Fatalf("event logs after collection: %v, want %v (live, died on its own)", ids, want)
	}
	now := time.Now().Add(DefaultDeadLogRetention + time.Minute)
	e.m.now = func() time.Time { return now }
	e.m.collectEventLogs(ctx)
	if ids, _ := e.m.cfg.Events.IDs(); !slices.Equal(ids, []string{live.ID}) {
		t.Fatalf("event logs after the retention: %v, want only %s", ids, live.ID)
	}
	e.shutdown(t)
}

// More logs than one batch reads: every batch is collected, and a record
// in a later batch still keeps its log.
func TestCollectEventLogsInBatches(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	late := eventlog.Event{Time: time.Now(), Level: eventlog.LevelInfo, Message: "late"}
	n := 2*eventGCBatch + 7
	for i := range n {
		if err := e.m.cfg.Events.Append(fmt.Sprintf("orphan%014d", i), late); err != nil {
			t.Fatal(err)
		}
	}
	// A sandbox another node runs: its record, no entry in this Manager.
	kept := fmt.Sprintf("orphan%014d", n-1)
	if err := e.st.PutSandbox(ctx, &store.Sandbox{ID: kept, ClientID: "node-b", State: string(StateRunning), TemplateID: "base"}); err != nil {
		t.Fatal(err)
	}
	e.m.collectEventLogs(ctx)
	if ids, err := e.m.cfg.Events.IDs(); err != nil || !slices.Equal(ids, []string{kept}) {
		t.Fatalf("event logs after collection: %d of them (%v), want only %s", len(ids), err, kept)
	}
}
