package sandbox

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/images"
	"github.com/forkbox/forkbox/internal/runtime"
)

func TestPauseResumeKeepsMemory(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	sb := e.create(t, CreateRequest{})
	for i := 1; i <= 3; i++ {
		if got := e.count(t, sb.ID); got != i {
			t.Fatalf("count before pause = %d, want %d", got, i)
		}
	}
	if err := e.m.Pause(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	// Info reports paused at once, whatever the pause's progress.
	if got, _ := e.m.Get(ctx, sb.ID); got.State.Public() != "paused" {
		t.Errorf("state after Pause = %s", got.State)
	}
	if err := e.m.Pause(ctx, sb.ID); !errdefs.IsConflict(err) {
		t.Errorf("second pause: %v, want conflict", err)
	}
	e.waitState(t, sb.ID, StatePaused)
	if _, err := e.m.Dial(ctx, sb.ID, 49983); !errdefs.IsConflict(err) {
		t.Errorf("dial paused: %v, want conflict", err)
	}
	if ids := e.runtimeIDs(t); len(ids) != 0 {
		t.Errorf("paused sandbox still holds runtime resources: %v", ids)
	}
	got, resumed, err := e.m.Connect(ctx, sb.ID, 0)
	if err != nil || !resumed || got.State != StateRunning {
		t.Fatalf("connect: %v resumed=%v err=%v", got, resumed, err)
	}
	if n := e.count(t, sb.ID); n != 4 {
		t.Errorf("count after resume = %d, want 4 (memory lost)", n)
	}
	if _, resumed, _ := e.m.Connect(ctx, sb.ID, 0); resumed {
		t.Error("connect to a running sandbox resumed it")
	}
	if e.hasImage(images.Pause(sb.ID)) {
		t.Errorf("pause image not removed after resume: %v", err)
	}
}

func TestConnectWaitsForPause(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	sb := e.create(t, CreateRequest{})
	e.count(t, sb.ID)
	if err := e.m.Pause(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	// No polling by the caller: connect right away.
	got, resumed, err := e.m.Connect(ctx, sb.ID, 30*time.Second)
	if err != nil || !resumed {
		t.Fatalf("connect during pause: %v %v", resumed, err)
	}
	if n := e.count(t, sb.ID); n != 2 {
		t.Errorf("count = %d, want 2", n)
	}
	if d := time.Until(got.EndAt); d > 31*time.Second || d < 29*time.Second {
		t.Errorf("resume TTL = %s, want the caller's 30s", d)
	}
}

func TestSnapshotOutlivesSandbox(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	sb := e.create(t, CreateRequest{})
	e.count(t, sb.ID)
	e.count(t, sb.ID)
	snap, err := e.m.Snapshot(ctx, sb.ID, SnapshotOptions{Name: "two"})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := e.m.Get(ctx, sb.ID); got.State != StateRunning {
		t.Errorf("source after snapshot: %s", got.State)
	}
	if _, err := e.m.Snapshot(ctx, sb.ID, SnapshotOptions{Name: "two"}); !errors.Is(err, errdefs.ErrAlreadyExists) {
		t.Errorf("duplicate name: %v", err)
	}
	e.m.Kill(ctx, sb.ID)
	list, _, err := e.m.ListSnapshots(ctx, SnapshotFilter{SandboxID: sb.ID})
	if err != nil || len(list) != 1 || list[0].ID != snap.ID {
		t.Fatalf("snapshots of killed sandbox: %v %v", list, err)
	}
	for _, ref := range []string{snap.ID, "two"} {
		nb := e.create(t, CreateRequest{TemplateID: ref})
		if n := e.count(t, nb.ID); n != 3 {
			t.Errorf("sandbox from snapshot %s: count = %d, want 3", ref, n)
		}
		if nb.ParentID != snap.ID || nb.Origin != "restore" {
			t.Errorf("lineage of restored sandbox: parent %q origin %q", nb.ParentID, nb.Origin)
		}
	}
	if err := e.m.DeleteSnapshot(ctx, snap.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.Create(ctx, CreateRequest{TemplateID: snap.ID}); !errdefs.IsNotFound(err) {
		t.Errorf("create from deleted snapshot: %v", err)
	}
	if e.hasImage(images.Snapshot(snap.ID)) {
		t.Errorf("snapshot image left on disk")
	}
}

func TestSnapshotPaging(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	sb := e.create(t, CreateRequest{})
	for i := 0; i < 5; i++ {
		if _, err := e.m.Snapshot(ctx, sb.ID, SnapshotOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	total, tok := 0, ""
	for pages := 0; ; pages++ {
		list, next, err := e.m.ListSnapshots(ctx, SnapshotFilter{Limit: 2, NextToken: tok})
		if err != nil {
			t.Fatal(err)
		}
		total += len(list)
		if next == "" {
			if pages != 2 {
				t.Errorf("pages = %d, want 3", pages+1)
			}
			break
		}
		tok = next
	}
	if total != 5 {
		t.Errorf("listed %d snapshots, want 5", total)
	}
}

func TestCloneRunningAndPaused(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	src := e.create(t, CreateRequest{AutoPause: true, AutoResume: true, Metadata: map[string]string{"m": "1"}})
	e.count(t, src.ID)
	res, err := e.m.Clone(ctx, src.ID, CloneOptions{Count: 3})
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range res.Sandboxes {
		if c == nil {
			t.Fatalf("clone %d failed: %v", i, res.Errors[i])
		}
		if c.AutoPause || !c.AutoResume || c.Metadata["m"] != "1" {
			t.Errorf("clone inheritance: autoPause=%v autoResume=%v metadata=%v", c.AutoPause, c.AutoResume, c.Metadata)
		}
		// Inheritance of the past, isolation of the future.
		if n := e.count(t, c.ID); n != 2 {
			t.Errorf("clone %d count = %d, want 2", i, n)
		}
	}
	if n := e.count(t, src.ID); n != 2 {
		t.Errorf("source count = %d, want 2 (clones touched it)", n)
	}
	// A paused source stays paused.
	e.m.Pause(ctx, src.ID)
	e.waitState(t, src.ID, StatePaused)
	res2, err := e.m.Clone(ctx, src.ID, CloneOptions{Count: 1})
	if err != nil || res2.Sandboxes[0] == nil {
		t.Fatalf("clone of paused: %v %v", err, res2)
	}
	if got, _ := e.m.Get(ctx, src.ID); got.State != StatePaused {
		t.Errorf("paused source is now %s", got.State)
	}
	if n := e.count(t, res2.Sandboxes[0].ID); n != 3 {
		t.Errorf("clone of paused count = %d, want 3", n)
	}
	// The generated snapshot is in use: it cannot be deleted yet.
	if err := e.m.DeleteSnapshot(ctx, res.SnapshotID); !errdefs.IsConflict(err) {
		t.Errorf("delete clone snapshot in use: %v", err)
	}
	if _, err := e.m.Clone(ctx, src.ID, CloneOptions{Count: 0}); !errdefs.IsInvalidArgument(err) {
		t.Errorf("count 0: %v", err)
	}
}

func TestStrictCloneLeavesNothing(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	src := e.create(t, CreateRequest{})
	var n atomic.Int32
	e.rt.FailRestore = func(runtime.Spec, string) error {
		if n.Add(1) == 2 {
			return errdefs.ErrResourceExhausted
		}
		return nil
	}
	if _, err := e.m.Clone(ctx, src.ID, CloneOptions{Count: 3, Strict: true}); err == nil {
		t.Fatal("strict clone with a failure succeeded")
	}
	if ids := e.runtimeIDs(t); len(ids) != 1 || ids[0] != src.ID {
		t.Errorf("runtime holds %v, want only the source", ids)
	}
	list, _, _ := e.m.List(ctx, ListFilter{})
	if len(list) != 1 {
		t.Errorf("%d sandboxes listed, want only the source", len(list))
	}
	snaps, _, _ := e.m.ListSnapshots(ctx, SnapshotFilter{})
	if len(snaps) != 0 {
		t.Errorf("temporary snapshot left: %v", snaps)
	}
}

func TestRollbackTimeline(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	sb := e.create(t, CreateRequest{})
	e.count(t, sb.ID) // 1 = "v1"
	snap, err := e.m.Snapshot(ctx, sb.ID, SnapshotOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e.count(t, sb.ID) // 2 = "v2"
	e.count(t, sb.ID)
	if _, err := e.m.Rollback(ctx, sb.ID, snap.ID); err != nil {
		t.Fatal(err)
	}
	if n := e.count(t, sb.ID); n != 2 {
		t.Errorf("after rollback count = %d, want 2", n)
	}
	snap2, _ := e.m.Snapshot(ctx, sb.ID, SnapshotOptions{})
	nb := e.create(t, CreateRequest{TemplateID: snap2.ID})
	if n := e.count(t, nb.ID); n != 3 {
		t.Errorf("new sandbox from second snapshot: %d, want 3", n)
	}
	// Another lineage's snapshot is refused.
	other := e.create(t, CreateRequest{})
	if _, err := e.m.Rollback(ctx, other.ID, snap.ID); !errdefs.IsInvalidArgument(err) {
		t.Errorf("foreign rollback: %v", err)
	}
	// A sandbox started from a snapshot may roll back to it.
	if _, err := e.m.Rollback(ctx, nb.ID, snap2.ID); err != nil {
		t.Errorf("rollback to own origin: %v", err)
	}
	tree, err := e.m.Lineage(ctx, nb.ID)
	if err != nil || tree.ID != sb.ID {
		t.Fatalf("lineage root = %v, %v; want %s", tree, err, sb.ID)
	}
}

// TestRollbackFailureKeepsSandbox: a rollback whose restore fails leaves
// the running sandbox as it was, still running with its state.
func TestRollbackFailureKeepsSandbox(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	sb := e.create(t, CreateRequest{})
	e.count(t, sb.ID)
	snap, err := e.m.Snapshot(ctx, sb.ID, SnapshotOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e.count(t, sb.ID)
	e.rt.FailRestore = func(runtime.Spec, string) error { return errdefs.ErrResourceExhausted }
	if _, err := e.m.Rollback(ctx, sb.ID, snap.ID); !errors.Is(err, errdefs.ErrResourceExhausted) {
		t.Fatalf("rollback with a failing restore: %v", err)
	}
	e.rt.FailRestore = nil
	got, err := e.m.Get(ctx, sb.ID)
	if err != nil || got.State != StateRunning {
		t.Fatalf("after failed rollback: %+v %v", got, err)
	}
	if n := e.count(t, sb.ID); n != 3 {
		t.Errorf("count after failed rollback = %d, want 3 (state kept)", n)
	}
}

func TestAutoPauseAndAutoResume(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { e.m.Run(ctx); close(done) }()
		sb := e.create(t, CreateRequest{Timeout: 2 * time.Second, AutoPause: true, AutoResume: true})
		e.count(t, sb.ID)
		time.Sleep(3 * time.Second)
		synctest.Wait()
		got, err := e.m.Get(ctx, sb.ID)
		if err != nil || got.State != StatePaused {
			t.Fatalf("after deadline: %v %v, want paused", got, err)
		}
		// Traffic to an auto-resume sandbox wakes it.
		dataPlane := &http.Client{Transport: e.m.Transport()}
		if n := e.countVia(t, dataPlane, sb.ID); n != 2 {
			t.Errorf("count after auto-resume = %d, want 2", n)
		}
		dataPlane.CloseIdleConnections()
		cancel()
		<-done
		e.shutdown(t)
	})
}

func TestKillRacingEviction(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	for i := 0; i < 20; i++ {
		sb := e.create(t, CreateRequest{})
		errs := make(chan error, 2)
		go func() { errs <- e.m.Kill(ctx, sb.ID) }()
		go func() { errs <- e.m.Kill(ctx, sb.ID) }()
		a, b := <-errs, <-errs
		okCount := 0
		for _, err := range []error{a, b} {
			switch {
			case err == nil:
				okCount++
			case errdefs.IsNotFound(err):
			default:
				t.Fatalf("kill: unexpected %v", err)
			}
		}
		if okCount != 1 {
			t.Fatalf("concurrent kills: %v / %v; want exactly one success", a, b)
		}
	}
}

func TestRecoverAfterRestart(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	alive := e.create(t, CreateRequest{})
	e.count(t, alive.ID)
	paused := e.create(t, CreateRequest{})
	e.m.Pause(ctx, paused.ID)
	e.waitState(t, paused.ID, StatePaused)
	dead := e.create(t, CreateRequest{})
	e.rt.Kill(dead.ID) // its runtime side vanished while "the daemon was down"
	e.rt.Delete(ctx, dead.ID)
	// An orphan: in the runtime, unknown to the store.
	e.m.mu.Lock() // the dead sandbox's exit is being handled meanwhile
	rootFS := e.m.boxes[alive.ID].rec.RootFS
	e.m.mu.Unlock()
	if _, err := e.rt.Create(ctx, runtime.Spec{ID: "orphan00000000000000", RootFS: rootFS}); err != nil {
		t.Fatal(err)
	}
	m2 := e.newManager(t)
	// The restarted daemon opens the same image directory afresh.
	d, err := images.NewDisk(e.m.cfg.ImageDir)
	if err != nil {
		t.Fatal(err)
	}
	m2.img, m2.cfg.ImageDir = d, e.m.cfg.ImageDir
	if err := m2.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	e.m = m2
	if got, err := m2.Get(ctx, alive.ID); err != nil || got.State != StateRunning {
		t.Errorf("alive after restart: %v %v", got, err)
	}
	if n := e.count(t, alive.ID); n != 2 {
		t.Errorf("reattached sandbox count = %d, want 2", n)
	}
	if got, err := m2.Get(ctx, paused.ID); err != nil || got.State != StatePaused {
		t.Errorf("paused after restart: %v %v", got, err)
	}
	if _, err := m2.Get(ctx, dead.ID); !errdefs.IsNotFound(err) {
		t.Errorf("dead sandbox after restart: %v", err)
	}
	if ids := e.runtimeIDs(t); len(ids) != 1 || ids[0] != alive.ID {
		t.Errorf("runtime after recover: %v, want only %s", ids, alive.ID)
	}
	if _, resumed, err := m2.Connect(ctx, paused.ID, 0); err != nil || !resumed {
		t.Errorf("resume after restart: %v", err)
	}
}

// A clone's snapshot is removed once its source and every clone are gone;
// a snapshot past its TTL is removed once unused; others stay.
func TestSnapshotCollection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		ctx := context.Background()
		src := e.create(t, CreateRequest{})
		res, err := e.m.Clone(ctx, src.ID, CloneOptions{Count: 2})
		if err != nil {
			t.Fatal(err)
		}
		keep, _ := e.m.Snapshot(ctx, src.ID, SnapshotOptions{Name: "keep"})
		short, _ := e.m.Snapshot(ctx, src.ID, SnapshotOptions{TTL: time.Minute})
		exists := func(id string) bool { _, err := e.st.GetTemplate(ctx, id); return err == nil }

		e.m.Kill(ctx, res.Sandboxes[0].ID)
		e.m.collectSnapshots(ctx)
		if !exists(res.SnapshotID) {
			t.Fatal("clone snapshot removed while its source and a clone live")
		}
		e.m.Kill(ctx, res.Sandboxes[1].ID)
		e.m.Kill(ctx, src.ID)
		e.m.collectSnapshots(ctx)
		if exists(res.SnapshotID) {
			t.Error("clone snapshot kept after its source and clones died")
		}
		if !exists(short.ID) || !exists(keep.ID) {
			t.Fatal("snapshots removed before their TTL")
		}
		time.Sleep(2 * time.Minute)
		e.m.collectSnapshots(ctx)
		if exists(short.ID) {
			t.Error("snapshot kept past its TTL")
		}
		if !exists(keep.ID) {
			t.Error("snapshot without a TTL removed")
		}
		e.shutdown(t)
	})
}
