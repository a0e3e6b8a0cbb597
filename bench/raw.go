package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// rawBench measures raw runsc on the same machine: the floor.
type rawBench struct {
	r    *rawRunsc
	res  *Results
	cfg  config
	nets []rawNet // nets[0] for single sandboxes, nets[1:] for clones
}

// rawBox is one raw runsc container.
type rawBox struct {
	id, bundle string
	argv       []string // restores must use the checkpointed argv
	net        rawNet
	out        *lineStream
}

var sleepArgv = []string{"/bin/sleep", "86400"}

func newRawBench(ctx context.Context, cfg config, res *Results, dir string) (*rawBench, error) {
	r := &rawRunsc{bin: filepath.Join(cfg.bin, "runsc"), root: filepath.Join(dir, "runsc-root"),
		dir: dir, rootfs: filepath.Join(cfg.templateDir, "base", "rootfs"), flags: strings.Fields(cfg.rawFlags)}
	if err := os.MkdirAll(r.root, 0o700); err != nil {
		return nil, err
	}
	b := &rawBench{r: r, res: res, cfg: cfg}
	for slot := cfg.rawSlot0; slot <= cfg.rawSlot0+cloneCounts[len(cloneCounts)-1]; slot++ {
		n := newRawNet(slot)
		b.nets = append(b.nets, n)
		if err := n.setup(ctx); err != nil {
			b.close(ctx)
			return nil, err
		}
	}
	return b, nil
}

// close removes every container, namespace and cgroup the raw bench made.
func (b *rawBench) close(ctx context.Context) {
	ctx = context.WithoutCancel(ctx)
	removeRunscContainers(ctx, b.r.bin, b.r.root)
	for _, n := range b.nets {
		n.remove(ctx)
	}
	ents, _ := os.ReadDir("/sys/fs/cgroup")
	for _, e := range ents {
		sub, _ := os.ReadDir(filepath.Join("/sys/fs/cgroup", e.Name(), "fbbench"))
		for _, s := range sub {
			os.Remove(filepath.Join("/sys/fs/cgroup", e.Name(), "fbbench", s.Name()))
		}
	}
	removeCgroups("/fbbench")
}

func (b *rawBench) fail(err error, keys ...string) {
	slog.Error("raw runsc measurement failed", "keys", keys, "err", err)
	for _, k := range keys {
		b.res.NA(k, Raw, "failed: "+shortErr(err))
	}
}

// prepare readies net and writes a bundle for a new container.
func (b *rawBench) prepare(ctx context.Context, net rawNet, argv []string) (*rawBox, error) {
	if err := net.reset(ctx); err != nil {
		return nil, err
	}
	id := b.r.newID()
	bundle, err := b.r.bundle(id, net, argv)
	return &rawBox{id: id, bundle: bundle, argv: argv, net: net}, err
}

// run creates and starts argv in net and waits for ready in its output
// (empty: don't wait).
func (b *rawBench) run(ctx context.Context, net rawNet, ready string, argv ...string) (*rawBox, error) {
	box, err := b.prepare(ctx, net, argv)
	if err != nil {
		return nil, err
	}
	if box.out, err = b.r.create(ctx, box.id, box.bundle); err != nil {
		return nil, err
	}
	if err := b.r.start(ctx, box.id); err != nil {
		b.kill(ctx, box)
		return nil, err
	}
	if ready != "" {
		wctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		if _, err := box.out.waitFor(wctx, ready); err != nil {
			b.kill(ctx, box)
			return nil, err
		}
	}
	return box, nil
}

func (b *rawBench) kill(ctx context.Context, box *rawBox) {
	b.r.delete(ctx, box.id)
	if box.out != nil {
		box.out.Close()
	}
	os.RemoveAll(box.bundle)
}

// workload starts the sandbox of size sz (tiny: sleep; 256: the hog),
// plus the gap ticker when gap is set.
func (b *rawBench) workload(ctx context.Context, net rawNet, sz size, gap bool) (*rawBox, error) {
	modes := slicesClone(sz.modes)
	if gap {
		modes = append(modes, "gap")
	}
	switch {
	case len(modes) == 0:
		return b.run(ctx, net, "", sleepArgv...)
	case gap:
		return b.run(ctx, net, "gapready", workloadArgv(modes...)...)
	default:
		return b.run(ctx, net, "hogready", workloadArgv(modes...)...)
	}
}

func slicesClone(s []string) []string { return append([]string(nil), s...) }

// benchCreate: create+start of `/bin/echo hi` until "hi" is read.
func (b *rawBench) benchCreate(ctx context.Context) {
	var total, create samples
	for i := range b.cfg.n + 1 { // iteration 0 warms caches and is dropped
		box, err := b.prepare(ctx, b.nets[0], echoArgv)
		if err != nil {
			b.fail(err, "create.total", "create.api")
			return
		}
		t0 := time.Now()
		box.out, err = b.r.create(ctx, box.id, box.bundle)
		t1 := time.Now()
		if err == nil {
			err = b.r.start(ctx, box.id)
		}
		var at time.Time
		if err == nil {
			wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			at, err = box.out.waitFor(wctx, "hi")
			cancel()
		}
		b.kill(ctx, box)
		if err != nil {
			b.fail(err, "create.total", "create.api")
			return
		}
		slog.Info("raw create", "i", i, "total", at.Sub(t0))
		if i > 0 {
			total.addDur(at.Sub(t0))
			create.addDur(t1.Sub(t0))
		}
	}
	b.res.Set("create.total", Raw, total)
	b.res.Set("create.api", Raw, create)
}

// benchEcho: `runsc exec <id> /bin/echo hi` on a running sandbox.
func (b *rawBench) benchEcho(ctx context.Context) {
	box, err := b.run(ctx, b.nets[0], "", sleepArgv...)
	if err != nil {
		b.fail(err, "echo.rtt")
		return
	}
	defer b.kill(ctx, box)
	for key, argv := range map[string][]string{"echo.sdk": sdkEchoArgv, "echo.rtt": echoArgv} {
		var rtt samples
		for i := range b.cfg.echoN + 3 {
			t0 := time.Now()
			if err := b.r.echoWith(ctx, box.id, argv); err != nil {
				b.fail(err, key)
				return
			}
			if i >= 3 {
				rtt.addDur(time.Since(t0))
			}
		}
		b.res.Set(key, Raw, rtt)
	}
}

// benchMemory: memoryConcurrent idle `sleep` sandboxes, 2 s after start,
// measured from the host.
func (b *rawBench) benchMemory(ctx context.Context) {
	var boxes []*rawBox
	defer func() {
		for _, box := range boxes {
			b.kill(ctx, box)
		}
	}()
	for i := range memoryConcurrent {
		box, err := b.run(ctx, b.nets[i], "", sleepArgv...)
		if err != nil {
			b.fail(err, "memory.host")
			return
		}
		boxes = append(boxes, box)
	}
	time.Sleep(2 * time.Second)
	var ms memSamples
	for _, box := range boxes {
		m, err := measureHost(box.id)
		if err != nil {
			b.fail(err, "memory.host")
			return
		}
		ms.add(m)
	}
	ms.set(b.res, Raw)
}

// restoreEcho restores image as a new container in net and waits for
// `runsc exec echo hi`; the returned duration starts at restore.
func (b *rawBench) restoreEcho(ctx context.Context, net rawNet, image string, argv []string) (*rawBox, time.Duration, error) {
	box, err := b.prepare(ctx, net, argv)
	if err != nil {
		return nil, 0, err
	}
	t0 := time.Now()
	if box.out, err = b.r.restore(ctx, box.id, box.bundle, image); err != nil {
		return box, 0, err
	}
	err = b.r.echo(ctx, box.id)
	return box, time.Since(t0), err
}

func (b *rawBench) imageDir(name string) string {
	return filepath.Join(b.r.dir, "images", fmt.Sprintf("%s-%d", name, b.r.seq.Add(1)))
}

// keysFor names the rows of an operation for a size.
func keysFor(sz size, ops ...string) []string {
	var out []string
	for _, op := range ops {
		out = append(out, strings.ReplaceAll(op, "*", sz.name))
	}
	return out
}

// concurrently runs f(i) for i < k and returns the first error.
func concurrently(k int, f func(i int) error) error {
	var wg sync.WaitGroup
	errs := make([]error, k)
	for i := range k {
		wg.Go(func() { errs[i] = f(i) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
