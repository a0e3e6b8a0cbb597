package sandbox

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/forkbox/forkbox/internal/errdefs"
)

// wantQuota checks that err is the quota refusal.
func wantQuota(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, errdefs.ErrResourceExhausted) || !strings.Contains(err.Error(), QuotaMessage) {
		t.Fatalf("%s at the limit: %v, want %q (resource exhausted)", what, err, QuotaMessage)
	}
}

// TestQuotaCapsRunningSandboxes fills a limit of 2 and checks that a
// create, a clone, a fork-sized clone and a resume past it are refused with
// nothing made (no runtime sandbox, no record, no snapshot), that paused
// sandboxes do not count, and that a kill frees a slot.
func TestQuotaCapsRunningSandboxes(t *testing.T) {
	e := newEnv(t)
	e.m.cfg.MaxSandboxes = 2
	ctx := context.Background()
	a := e.create(t, CreateRequest{})
	b := e.create(t, CreateRequest{})
	_, err := e.m.Create(ctx, CreateRequest{TemplateID: "base"})
	wantQuota(t, "create", err)
	_, err = e.m.Clone(ctx, a.ID, CloneOptions{Count: 1})
	wantQuota(t, "clone", err)
	if ids := e.runtimeIDs(t); len(ids) != 2 {
		t.Fatalf("runtime holds %v after refusals, want only %s and %s", ids, a.ID, b.ID)
	}
	if snaps, _, err := e.m.ListSnapshots(ctx, SnapshotFilter{}); err != nil || len(snaps) != 0 {
		t.Fatalf("snapshots after a refused clone: %v %v", snaps, err)
	}

	if err := e.m.Pause(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	e.waitState(t, b.ID, StatePaused)
	if e.m.Running() != 1 {
		t.Fatalf("running %d with one paused, want 1", e.m.Running())
	}
	c := e.create(t, CreateRequest{}) // the paused one's slot
	_, _, err = e.m.Connect(ctx, b.ID, 0)
	wantQuota(t, "resume", err)
	if sb, err := e.m.Get(ctx, b.ID); err != nil || sb.State != StatePaused {
		t.Fatalf("refused resume left %v %v, want paused", sb, err)
	}
	_, err = e.m.Clone(ctx, b.ID, CloneOptions{Count: 1}) // of the paused one
	wantQuota(t, "clone of a paused sandbox", err)

	if err := e.m.Kill(ctx, c.ID); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.m.Connect(ctx, b.ID, 0); err != nil {
		t.Fatalf("resume after a kill freed a slot: %v", err)
	}
	_, err = e.m.Clone(ctx, a.ID, CloneOptions{Count: 2})
	wantQuota(t, "clone ×2", err)
	e.shutdown(t)
}

// TestQuotaConcurrentCreates races 8 creates for 3 slots: exactly 3 run.
func TestQuotaConcurrentCreates(t *testing.T) {
	e := newEnv(t)
	e.m.cfg.MaxSandboxes = 3
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() { _, errs[i] = e.m.Create(context.Background(), CreateRequest{TemplateID: "base"}) })
	}
	wg.Wait()
	ok := 0
	for _, err := range errs {
		if err == nil {
			ok++
			continue
		}
		wantQuota(t, "a racing create", err)
	}
	if ids := e.runtimeIDs(t); ok != 3 || len(ids) != 3 {
		t.Fatalf("%d creates succeeded, runtime holds %v; want 3 of each", ok, ids)
	}
	if n := len(e.runtimeIDs(t)); n != e.m.Running() {
		t.Fatalf("runtime holds %d, the manager counts %d running", n, e.m.Running())
	}
	e.shutdown(t)
}
