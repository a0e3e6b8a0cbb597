package main

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/forkbox/forkbox/client"
)

// size is a workload size: "tiny" (just the agent) or "256" (a python
// process holding 256 MiB of touched memory).
type size struct {
	name  string
	modes []string
}

var sizes = []size{{"tiny", nil}, {"256", []string{"hog"}}}

const gib = float64(1 << 30)

// waitGone polls until pid has exited, for up to 2 minutes.
func waitGone(ctx context.Context, pid int) (time.Time, error) {
	deadline := time.Now().Add(2 * time.Minute)
	for alive(pid) {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return time.Time{}, fmt.Errorf("sandbox process %d still alive", pid)
		}
		time.Sleep(2 * time.Millisecond)
	}
	return time.Now(), nil
}

// benchPauseResume: pause (call → the sandbox's runsc process is gone, i.e.
// the checkpoint is written and the memory released; the API call itself
// returns at once) then resume (Connect → first echo output).
func (b *fbBench) benchPauseResume(ctx context.Context, sz size) {
	var pause, rate, ack, resume, connect samples
	pk, rk := "pause."+sz.name, "resume."+sz.name
	for i := range b.cfg.n {
		sb, err := b.sandboxWith(ctx, sz.modes...)
		if err == nil {
			err = b.pauseResumeOnce(ctx, sb, &pause, &rate, &ack, &resume, &connect)
			b.kill(ctx, sb.SandboxID)
		}
		if err != nil {
			b.fail(err, pk, rk, pk+".rate")
			return
		}
		slog.Info("forkbox pause/resume", "size", sz.name, "i", i, "pause_ms", pause[len(pause)-1], "resume_ms", resume[len(resume)-1])
	}
	b.res.Set(pk, FB, pause)
	b.res.Set(pk+".rate", FB, rate)
	b.res.Set(rk, FB, resume)
	if sz.name == "tiny" {
		b.res.Set("pause.ack", FB, ack)
		b.res.Set("resume.api", FB, connect)
	}
}

func (b *fbBench) pauseResumeOnce(ctx context.Context, sb *client.Sandbox, pause, rate, ack, resume, connect *samples) error {
	if _, err := echoUntil(ctx, sb.Conn()); err != nil {
		return err
	}
	m, err := b.measureHost(sb.SandboxID)
	if err != nil {
		return err
	}
	t0 := time.Now()
	if err := b.c.Pause(ctx, sb.SandboxID); err != nil {
		return err
	}
	ack.addDur(time.Since(t0))
	done, err := waitGone(ctx, m.SandboxPID)
	if err != nil {
		return err
	}
	pause.addDur(done.Sub(t0))
	rate.add(done.Sub(t0).Seconds() / (float64(m.Total()) / gib))
	time.Sleep(300 * time.Millisecond) // let the daemon finish its bookkeeping
	t0 = time.Now()
	sb2, err := b.c.Connect(ctx, sb.SandboxID, sandboxTTL)
	if err != nil {
		return err
	}
	connect.addDur(time.Since(t0))
	at, err := echoUntil(ctx, sb2.Conn())
	if err != nil {
		return err
	}
	resume.addDur(at.Sub(t0))
	return nil
}

// benchSnapshot: live snapshots of a sandbox running the gap ticker; the
// freeze is the longest tick gap inside the snapshot call's window.
func (b *fbBench) benchSnapshot(ctx context.Context, sz size) {
	keys := []string{"snapshot.freeze." + sz.name, "snapshot.call." + sz.name, "snapshot.image." + sz.name}
	sb, err := b.sandboxWith(ctx, append(sz.modes, "gap")...)
	if err != nil {
		b.fail(err, keys...)
		return
	}
	defer b.kill(ctx, sb.SandboxID)
	var call, image samples
	var windows [][2]time.Time
	for range b.cfg.n {
		time.Sleep(300 * time.Millisecond)
		t0 := time.Now()
		snap, err := b.c.Snapshot(ctx, sb.SandboxID, "")
		if err != nil {
			b.fail(err, keys...)
			return
		}
		t1 := time.Now()
		call.addDur(t1.Sub(t0))
		windows = append(windows, [2]time.Time{t0, t1})
		image.add(mib(dirBytes(filepath.Join(b.d.DataDir, "images", "snapshots", snap.SnapshotID))))
		if err := b.c.DeleteSnapshot(ctx, snap.SnapshotID); err != nil {
			slog.Warn("delete snapshot", "snapshot", snap.SnapshotID, "err", err)
		}
	}
	out, err := sb.Conn().ReadFile(ctx, "/tmp/workload.out")
	if err != nil {
		b.fail(err, keys[0])
		return
	}
	b.res.Set(keys[0], FB, freezes(strings.Split(string(out), "\n"), windows))
	b.res.Set(keys[1], FB, call)
	b.res.Set(keys[2], FB, image)
}

// benchClone: Clone ×k of one source, until every clone answered echo.
func (b *fbBench) benchClone(ctx context.Context, sz size) {
	src, err := b.sandboxWith(ctx, sz.modes...)
	if err != nil {
		b.fail(err, cloneKeys(sz)...)
		return
	}
	defer b.kill(ctx, src.SandboxID)
	for _, k := range cloneCounts {
		key := fmt.Sprintf("clone.%s.%d", sz.name, k)
		var wall samples
		for range b.cfg.cloneReps {
			d, err := b.cloneOnce(ctx, src.SandboxID, k, echoesHi)
			if err != nil {
				b.fail(err, key)
				break
			}
			wall.addDur(d)
			slog.Info("forkbox clone", "size", sz.name, "k", k, "took", d)
		}
		b.res.Set(key, FB, wall)
	}
	if sz.name == "256" {
		b.benchCloneMemory(ctx, src)
	}
}

var cloneCounts = []int{1, 4, 10}

func cloneKeys(sz size) []string {
	var ks []string
	for _, k := range cloneCounts {
		ks = append(ks, fmt.Sprintf("clone.%s.%d", sz.name, k))
	}
	return ks
}

// echoesHi waits until the sandbox answers echo.
func echoesHi(ctx context.Context, sb *client.Sandbox) error {
	_, err := echoUntil(ctx, sb.Conn())
	return err
}

// cloneOnce clones id k times (strict) and returns the wall time until
// answers succeeded in every clone, run concurrently; the clones are killed
// afterwards.
func (b *fbBench) cloneOnce(ctx context.Context, id string, k int, answers func(context.Context, *client.Sandbox) error) (time.Duration, error) {
	t0 := time.Now()
	res, err := b.c.Clone(ctx, id, client.CloneOptions{Count: k, Strict: true, Timeout: sandboxTTL})
	if err != nil {
		return 0, err
	}
	defer func() {
		for _, sb := range res.Sandboxes {
			b.kill(ctx, sb.SandboxID)
		}
	}()
	if len(res.Sandboxes) != k {
		return 0, fmt.Errorf("clone ×%d returned %d sandboxes", k, len(res.Sandboxes))
	}
	var wg sync.WaitGroup
	errs := make([]error, k)
	for i, sb := range res.Sandboxes {
		wg.Go(func() { errs[i] = answers(ctx, sb) })
	}
	wg.Wait()
	d := time.Since(t0)
	for _, err := range errs {
		if err != nil {
			return 0, err
		}
	}
	return d, nil
}

// benchRollback: Rollback to one snapshot, until echo answers.
func (b *fbBench) benchRollback(ctx context.Context, sz size) {
	key := "rollback." + sz.name
	sb, err := b.sandboxWith(ctx, sz.modes...)
	if err != nil {
		b.fail(err, key)
		return
	}
	snap, err := b.c.Snapshot(ctx, sb.SandboxID, "")
	if err != nil {
		b.kill(ctx, sb.SandboxID)
		b.fail(err, key)
		return
	}
	for _, m := range samplePacings {
		var rb samples
		for range b.cfg.n {
			time.Sleep(m.gap)
			t0 := time.Now()
			if _, err = b.c.Rollback(ctx, sb.SandboxID, snap.SnapshotID); err != nil {
				break
			}
			var at time.Time
			if at, err = echoUntil(ctx, sb.Conn()); err != nil {
				break
			}
			rb.addDur(at.Sub(t0))
		}
		if err != nil {
			break
		}
		b.res.Set(key+m.suffix, FB, rb)
	}
	b.kill(ctx, sb.SandboxID)
	if derr := b.c.DeleteSnapshot(ctx, snap.SnapshotID); derr != nil {
		slog.Warn("delete snapshot", "snapshot", snap.SnapshotID, "err", derr)
	}
	if err != nil {
		b.fail(err, key)
	}
}

// samplePacings are the two ways rollbacks are timed: samples apart, as an
// agent that thinks between calls makes them (the background work one
// leaves — refilling the standby containers, removing the replaced one —
// is done before the next), and back to back.
var samplePacings = []struct {
	suffix string
	gap    time.Duration
}{{"", 500 * time.Millisecond}, {".b2b", 0}}
