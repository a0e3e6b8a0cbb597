package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/forkbox/forkbox/bench/benchd"
	"github.com/forkbox/forkbox/client"
)

type results struct {
	diff, snapDiff, apply, upperOnly, snapshot, tar times
	changes, applied                                int
}

// tree selects what the bench changed (the whole tree is diffed anyway:
// a filter only skips comparing).
var tree = []string{"/home/user/tree"}

func measure(ctx context.Context, cl *client.Client, c config, parent, b string) (*results, error) {
	r := &results{}
	for i := range c.runs {
		t0 := time.Now()
		cs, err := cl.DiffAll(ctx, b, client.DiffOptions{Paths: tree})
		if err != nil {
			return nil, err
		}
		r.diff = append(r.diff, benchd.MS(time.Since(t0)))
		r.changes = len(cs)
		t0 = time.Now()
		if _, err := cl.Diff(ctx, b, client.DiffOptions{Paths: []string{"/nothing/here"}}); err != nil {
			return nil, err
		}
		r.upperOnly = append(r.upperOnly, benchd.MS(time.Since(t0)))
		slog.Info("diff", "i", i, "ms", r.diff[i], "changes", r.changes, "upper_only_ms", r.upperOnly[i])
	}
	if r.changes != 1000 {
		return nil, fmt.Errorf("diff lists %d changes, want 1000", r.changes)
	}
	var q string
	for range c.runs {
		t0 := time.Now()
		s, err := cl.Snapshot(ctx, b, "")
		if err != nil {
			return nil, err
		}
		r.snapshot = append(r.snapshot, benchd.MS(time.Since(t0)))
		q = s.SnapshotID
	}
	for i := range c.runs {
		t0 := time.Now()
		cs, err := allSnapshot(ctx, cl, q, parent)
		if err != nil {
			return nil, err
		}
		r.snapDiff = append(r.snapDiff, benchd.MS(time.Since(t0)))
		if cs != 1000 {
			return nil, fmt.Errorf("snapshot diff lists %d changes, want 1000", cs)
		}
		slog.Info("snapshot diff", "i", i, "ms", r.snapDiff[i])
	}
	return r, measureApply(ctx, cl, c, parent, b, r)
}

func allSnapshot(ctx context.Context, cl *client.Client, id, against string) (int, error) {
	o := client.DiffOptions{Against: against, Paths: tree}
	n := 0
	for {
		d, err := cl.DiffSnapshot(ctx, id, o)
		if err != nil {
			return 0, err
		}
		n += len(d.Changes)
		if d.Next == "" {
			return n, nil
		}
		o.Cursor = d.Next
	}
}

// measureApply applies B's changes into fresh sandboxes started from P.
func measureApply(ctx context.Context, cl *client.Client, c config, parent, b string, r *results) error {
	for i := range c.runs {
		t, err := cl.CreateSandbox(ctx, client.CreateOptions{TemplateID: parent, Timeout: time.Hour})
		if err != nil {
			return err
		}
		t0 := time.Now()
		res, err := cl.Apply(ctx, t.SandboxID, client.ApplyOptions{From: b})
		if err != nil {
			return err
		}
		r.apply = append(r.apply, benchd.MS(time.Since(t0)))
		r.applied = len(res.Applied)
		slog.Info("apply", "i", i, "ms", r.apply[i], "applied", r.applied, "conflicts", len(res.Conflicts))
		if r.applied != 1000 || len(res.Conflicts) != 0 {
			return fmt.Errorf("apply: %d applied, %d conflicts, want 1000 and 0", r.applied, len(res.Conflicts))
		}
		if err := cl.KillSandbox(ctx, t.SandboxID); err != nil {
			return err
		}
	}
	return nil
}

func report(c config, r *results) {
	fmt.Printf(`
## Diff and apply (issue 24)

A 50,000-file tree: the base template (42,347 entries) plus 8,000 files of
about 1 KiB a sandbox wrote, snapshotted as parent P; sandbox B, started
from P, changed 1,000 of them (600 edited, 300 added, 100 deleted). %d runs
each, median (min, max), ms, on a 2-core machine shared with other
builds and tests while it ran (numbers are noisy).

| measurement | ms | target |
|---|---|---|
| diff of running B against its parent P (%d changes, all pages) | %s | ≤ 500 |
| diff of B's snapshot against P (two snapshots) | %s | ≤ 300 |
| apply of B's %d changes into a fresh sandbox from P | %s | ≤ 1000 |
| reading B's upper layer alone (a diff selecting nothing) | %s | |
| of which `+"`runsc tar rootfs-upper`"+` (the sandbox's writers wait; %d samples) | %s | |
| live snapshot of B, for comparison (its freeze is part of it) | %s | |

`, c.runs, r.changes, r.diff, r.snapDiff, r.applied, r.apply, r.upperOnly, len(r.tar), r.tar, r.snapshot)
}
