package integration

import (
	"fmt"
	"testing"
	"time"

	"github.com/forkbox/forkbox/client"
)

// TestPauseResumeKeepsMemory: a Python process's variable and counter
// survive pause/resume, and 20 cycles with files written each time lose
// nothing.
func TestPauseResumeKeepsMemory(t *testing.T) {
	ctx := daemontestContext(t)
	_, c := start(t)
	sb := create(t, ctx, c, client.CreateOptions{})
	conn := sb.Conn()
	startState(t, ctx, conn)
	for cycle := 1; cycle <= 20; cycle++ {
		writeFile(t, ctx, conn, fmt.Sprintf("/tmp/cycle-%02d", cycle), fmt.Sprint(cycle))
		tok, n := readState(ctx, conn)
		if err := c.Pause(ctx, sb.SandboxID); err != nil {
			t.Fatalf("cycle %d pause: %v", cycle, err)
		}
		if st := state(t, ctx, c, sb.SandboxID); st != "paused" {
			t.Fatalf("cycle %d: state %q right after pause", cycle, st)
		}
		if _, err := c.Connect(ctx, sb.SandboxID, 0); err != nil {
			t.Fatalf("cycle %d resume: %v", cycle, err)
		}
		checkContinues(t, ctx, conn, tok, n)
	}
	for cycle := 1; cycle <= 20; cycle++ {
		if got := readFile(t, ctx, conn, fmt.Sprintf("/tmp/cycle-%02d", cycle)); got != fmt.Sprint(cycle) {
			t.Errorf("cycle %d file = %q", cycle, got)
		}
	}
	if err := c.Pause(ctx, sb.SandboxID); err != nil {
		t.Fatal(err)
	}
	if err := c.Pause(ctx, sb.SandboxID); !client.IsConflict(err) {
		t.Errorf("second pause: %v, want 409", err)
	}
	list, _, err := c.ListSandboxes(ctx, client.ListOptions{State: []string{"paused"}})
	if err != nil || len(list) != 1 || list[0].SandboxID != sb.SandboxID {
		t.Errorf("paused list: %v %v", list, err)
	}
	if err := c.KillSandbox(ctx, sb.SandboxID); err != nil {
		t.Fatalf("kill paused: %v", err)
	}
}

// TestSnapshotsOutliveSandbox: snapshot → kill source → listed (paged) and
// usable → delete.
func TestSnapshotsOutliveSandbox(t *testing.T) {
	ctx := daemontestContext(t)
	_, c := start(t)
	sb := create(t, ctx, c, client.CreateOptions{})
	conn := sb.Conn()
	startState(t, ctx, conn)
	writeFile(t, ctx, conn, "/tmp/v", "snap-1")
	first, err := c.Snapshot(ctx, sb.SandboxID, "first")
	if err != nil {
		t.Fatal(err)
	}
	tok, n := readState(ctx, conn)
	for i := 0; i < 2; i++ {
		if _, err := c.Snapshot(ctx, sb.SandboxID, ""); err != nil {
			t.Fatal(err)
		}
	}
	// The source keeps running through snapshots.
	checkContinues(t, ctx, conn, tok, n)
	if err := c.KillSandbox(ctx, sb.SandboxID); err != nil {
		t.Fatal(err)
	}
	var all []client.SnapshotInfo
	next, pages := "", 0
	for {
		page, tokNext, err := c.ListSnapshots(ctx, client.SnapshotListOptions{SandboxID: sb.SandboxID, Limit: 2, NextToken: next})
		if err != nil {
			t.Fatal(err)
		}
		all, pages = append(all, page...), pages+1
		if tokNext == "" {
			break
		}
		next = tokNext
	}
	if len(all) != 3 || pages != 2 {
		t.Errorf("listed %d snapshots in %d pages, want 3 in 2", len(all), pages)
	}
	nb := create(t, ctx, c, client.CreateOptions{TemplateID: first.SnapshotID})
	if got := readFile(t, ctx, nb.Conn(), "/tmp/v"); got != "snap-1" {
		t.Errorf("sandbox from snapshot reads %q", got)
	}
	tok2, _ := readState(ctx, nb.Conn())
	checkContinues(t, ctx, nb.Conn(), tok2, 0)
	if tok2 != tok {
		t.Errorf("process memory from the snapshot: token %q, want %q", tok2, tok)
	}
	if err := c.DeleteSnapshot(ctx, first.SnapshotID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateSandbox(ctx, client.CreateOptions{TemplateID: first.SnapshotID}); !client.IsNotFound(err) {
		t.Errorf("create from deleted snapshot: %v", err)
	}
}

// TestRollbackTimeline: v1 → snapshot → v2 → rollback → v1 → v3 → snapshot
// → a new sandbox reads v3.
func TestRollbackTimeline(t *testing.T) {
	ctx := daemontestContext(t)
	_, c := start(t)
	sb := create(t, ctx, c, client.CreateOptions{})
	conn := sb.Conn()
	writeFile(t, ctx, conn, "/home/user/v.txt", "v1")
	s1, err := c.Snapshot(ctx, sb.SandboxID, "")
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, ctx, conn, "/home/user/v.txt", "v2")
	start := time.Now()
	if _, err := c.Rollback(ctx, sb.SandboxID, s1.SnapshotID); err != nil {
		t.Fatal(err)
	}
	// The same handle keeps working: no reconnect by hand.
	if got := readFile(t, ctx, conn, "/home/user/v.txt"); got != "v1" {
		t.Fatalf("after rollback: %q, want v1", got)
	}
	t.Logf("rollback → first read: %s", time.Since(start))
	writeFile(t, ctx, conn, "/home/user/v.txt", "v3")
	s2, err := c.Snapshot(ctx, sb.SandboxID, "")
	if err != nil {
		t.Fatal(err)
	}
	nb := create(t, ctx, c, client.CreateOptions{TemplateID: s2.SnapshotID})
	if got := readFile(t, ctx, nb.Conn(), "/home/user/v.txt"); got != "v3" {
		t.Errorf("new sandbox from second snapshot reads %q, want v3", got)
	}
	other := create(t, ctx, c, client.CreateOptions{})
	_, err = c.Rollback(ctx, other.SandboxID, s1.SnapshotID)
	var apiErr *client.Error
	if !asError(err, &apiErr) || apiErr.Status != 400 {
		t.Errorf("rollback to another lineage's snapshot: %v, want 400", err)
	}
}
