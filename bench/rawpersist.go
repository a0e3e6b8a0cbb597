package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"
)

// benchPauseResume: `runsc checkpoint` (not --leave-running) until the
// sandbox process is gone, then restore as a new container until
// `runsc exec echo hi` answers (namespace prepared beforehand).
func (b *rawBench) benchPauseResume(ctx context.Context, sz size) {
	keys := keysFor(sz, "pause.*", "pause.*.rate", "resume.*")
	var pause, rate, resume samples
	for i := range b.cfg.n {
		p, r, g, err := b.pauseResumeOnce(ctx, sz)
		if err != nil {
			b.fail(err, keys...)
			return
		}
		pause.addDur(p)
		rate.add(p.Seconds() / g)
		resume.addDur(r)
		slog.Info("raw pause/resume", "size", sz.name, "i", i, "pause", p, "resume", r)
	}
	b.res.Set(keys[0], Raw, pause)
	b.res.Set(keys[1], Raw, rate)
	b.res.Set(keys[2], Raw, resume)
}

// pauseResumeOnce returns the pause and resume times and the sandbox's
// memory in GiB.
func (b *rawBench) pauseResumeOnce(ctx context.Context, sz size) (time.Duration, time.Duration, float64, error) {
	box, err := b.workload(ctx, b.nets[0], sz, false)
	if err != nil {
		return 0, 0, 0, err
	}
	m, err := measureHost(box.id)
	if err != nil {
		b.kill(ctx, box)
		return 0, 0, 0, err
	}
	image := b.imageDir("pause")
	defer os.RemoveAll(image)
	t0 := time.Now()
	err = b.r.checkpoint(ctx, box.id, image, false)
	var done time.Time
	if err == nil {
		done, err = waitGone(ctx, m.SandboxPID)
	}
	b.kill(ctx, box)
	if err != nil {
		return 0, 0, 0, err
	}
	box2, resume, err := b.restoreEcho(ctx, b.nets[0], image, box.argv)
	if box2 != nil {
		b.kill(ctx, box2)
	}
	return done.Sub(t0), resume, float64(m.Total()) / gib, err
}

// benchSnapshot: `checkpoint --leave-running` of a sandbox running the
// gap ticker: call time, freeze (longest tick gap) and image size.
func (b *rawBench) benchSnapshot(ctx context.Context, sz size) {
	keys := keysFor(sz, "snapshot.freeze.*", "snapshot.call.*", "snapshot.image.*")
	box, err := b.workload(ctx, b.nets[0], sz, true)
	if err != nil {
		b.fail(err, keys...)
		return
	}
	defer b.kill(ctx, box)
	var call, image samples
	var windows [][2]time.Time
	for range b.cfg.n {
		time.Sleep(300 * time.Millisecond)
		dir := b.imageDir("snap")
		t0 := time.Now()
		err := b.r.checkpoint(ctx, box.id, dir, true)
		t1 := time.Now()
		image.add(mib(dirBytes(dir)))
		os.RemoveAll(dir)
		if err != nil {
			b.fail(err, keys...)
			return
		}
		call.addDur(t1.Sub(t0))
		windows = append(windows, [2]time.Time{t0, t1})
	}
	time.Sleep(600 * time.Millisecond) // let the last gap line arrive
	var lines []string
	for _, l := range box.out.Lines() {
		lines = append(lines, l.text)
	}
	b.res.Set(keys[0], Raw, freezes(lines, windows))
	b.res.Set(keys[1], Raw, call)
	b.res.Set(keys[2], Raw, image)
}

// benchClone: one --leave-running checkpoint of a source, then k
// concurrent restores into their own namespaces until each answers echo.
func (b *rawBench) benchClone(ctx context.Context, sz size) {
	src, err := b.workload(ctx, b.nets[0], sz, false)
	if err != nil {
		b.fail(err, cloneKeys(sz)...)
		return
	}
	defer b.kill(ctx, src)
	image := b.imageDir("clone")
	defer os.RemoveAll(image)
	if err := b.r.checkpoint(ctx, src.id, image, true); err != nil {
		b.fail(err, cloneKeys(sz)...)
		return
	}
	for _, k := range cloneCounts {
		key := fmt.Sprintf("clone.%s.%d", sz.name, k)
		var wall samples
		for range b.cfg.cloneReps {
			d, err := b.cloneOnce(ctx, image, src.argv, k)
			if err != nil {
				b.fail(err, key)
				break
			}
			wall.addDur(d)
			slog.Info("raw clone", "size", sz.name, "k", k, "took", d)
		}
		b.res.Set(key, Raw, wall)
	}
	if sz.name == "256" {
		b.cloneMemory(ctx, src, image)
	}
}

func (b *rawBench) cloneOnce(ctx context.Context, image string, argv []string, k int) (time.Duration, error) {
	boxes := make([]*rawBox, k)
	defer func() {
		concurrently(k, func(i int) error {
			if boxes[i] != nil {
				b.kill(ctx, boxes[i])
			}
			return nil
		})
	}()
	for i := range k { // namespaces and bundles are ready before the clock starts
		var err error
		if boxes[i], err = b.prepare(ctx, b.nets[1+i], argv); err != nil {
			return 0, err
		}
	}
	t0 := time.Now()
	err := concurrently(k, func(i int) error {
		var err error
		if boxes[i].out, err = b.r.restore(ctx, boxes[i].id, boxes[i].bundle, image); err != nil {
			return err
		}
		return b.r.echo(ctx, boxes[i].id)
	})
	return time.Since(t0), err
}

// benchRollback: delete + re-add eth0's address and route + restore under
// the same id, until `runsc exec echo hi` answers (recipe "rollback").
func (b *rawBench) benchRollback(ctx context.Context, sz size) {
	key := "rollback." + sz.name
	box, err := b.workload(ctx, b.nets[0], sz, false)
	if err != nil {
		b.fail(err, key)
		return
	}
	defer func() { b.kill(ctx, box) }()
	image := b.imageDir("rollback")
	defer os.RemoveAll(image)
	if err := b.r.checkpoint(ctx, box.id, image, true); err != nil {
		b.fail(err, key)
		return
	}
	for _, m := range samplePacings {
		var rb samples
		for range b.cfg.n {
			time.Sleep(m.gap)
			t0 := time.Now()
			b.r.delete(ctx, box.id)
			box.out.Close()
			if err = box.net.reset(ctx); err == nil {
				box.out, err = b.r.restore(ctx, box.id, box.bundle, image)
			}
			if err == nil {
				err = b.r.echo(ctx, box.id)
			}
			if err != nil {
				b.fail(err, key)
				return
			}
			rb.addDur(time.Since(t0))
		}
		b.res.Set(key+m.suffix, Raw, rb)
	}
}
