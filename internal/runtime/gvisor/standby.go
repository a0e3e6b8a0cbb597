package gvisor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/forkbox/forkbox/internal/netns"
	"github.com/forkbox/forkbox/internal/runtime"
)

// maxWaitForMaking bounds how long a restore waits for the container the
// filler is making for its shape (a runsc create takes ~0.1 s) before it
// has runsc create one of its own.
const maxWaitForMaking = time.Second

// standbyCPUShares is the cgroup v1 cpu.shares of a standby container
// until adopt (the default weight is 1024): its sentry and gofer start up
// without taking CPU from running sandboxes.
const standbyCPUShares = 2

// maxShapes bounds how many sandbox shapes keep standby containers: a
// daemon restores from a handful of templates, and each standby costs a
// network slot and two idle processes.
const maxShapes = 4

// shape is what a standby container must share with a restored sandbox:
// the restore spec must have the checkpoint's mounts (the rootfs), and the
// limits and network access are fixed when runsc creates the container.
type shape struct {
	rootfs   string
	res      runtime.Resources
	internet bool
}

// standbyBox is one container created (`runsc create`) but not started,
// with its own network and bundle; a restore turns it into a sandbox.
type standbyBox struct {
	cid   string
	dir   string
	lease netns.Lease
	res   runtime.Resources
}

// handle describes sandbox spec restored into box.
func (b standbyBox) handle(spec runtime.Spec) handle {
	h := newHandle(spec, b.res, b.lease)
	h.Container, h.Bundle = b.cid, b.dir
	return h
}

// making is a container the filler is creating; done closes when it is in
// its pool (or failed).
type making struct {
	cid   string
	shape shape
	done  chan struct{}
}

// shapePool is the ready boxes of one shape and the spec to make more.
type shapePool struct {
	spec     runtime.Spec
	boxes    []standbyBox
	lastUsed time.Time
}

// standby keeps up to target containers per recently restored shape. One
// goroutine fills them, one at a time, so the filling never takes more
// than a core from the restores it speeds up.
type standby struct {
	r      *Runtime
	target int

	mu      sync.Mutex
	pools   map[shape]*shapePool
	stale   []standbyBox // of evicted shapes, to discard
	making  *making      // the container the filler is creating
	busy    int          // restores under way: the filler starts none then
	started bool
	closed  bool
	kick    chan struct{}
	stop    chan struct{}
	done    chan struct{}
}

func newStandby(r *Runtime, target int) *standby {
	return &standby{
		r: r, target: target, pools: map[shape]*shapePool{},
		kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
	}
}

// shapeOf is the shape of spec with the runtime's default limits applied.
func (s *standby) shapeOf(spec runtime.Spec) shape {
	return shape{spec.RootFS, withDefaults(spec.Resources, s.r.cfg.Defaults), spec.AllowInternet}
}

// begin marks a restore under way: the filler holds off until every
// restore has ended, so a burst (a clone ×N) gets the CPU to itself.
func (s *standby) begin() {
	s.mu.Lock()
	s.busy++
	s.mu.Unlock()
}

// end marks a restore of spec's shape done and asks for standby
// containers of that shape, evicting the least recently used shape beyond
// maxShapes.
func (s *standby) end(spec runtime.Spec) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.busy--
	if s.target <= 0 || s.closed {
		return
	}
	k := s.shapeOf(spec)
	p := s.pools[k]
	if p == nil {
		p = &shapePool{}
		s.pools[k] = p
	}
	// Stamped before evicting, so the shape just asked for is the newest.
	// Standby containers are made without volumes: any restore may take one.
	spec.Volumes = nil
	p.spec, p.lastUsed = spec, time.Now()
	s.evictLocked()
	if !s.started {
		s.started = true
		go s.run()
	}
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// evictLocked drops the least recently used shapes beyond maxShapes.
func (s *standby) evictLocked() {
	for len(s.pools) > maxShapes {
		var oldest *shape
		for k, p := range s.pools {
			if oldest == nil || p.lastUsed.Before(s.pools[*oldest].lastUsed) {
				oldest = &k
			}
		}
		s.stale = append(s.stale, s.pools[*oldest].boxes...)
		delete(s.pools, *oldest)
	}
}

// take hands out a ready container of spec's shape. If there is none but
// the filler is making one, it waits for that (up to maxWaitForMaking):
// sooner than, and not competing with, a runsc create of its own.
func (s *standby) take(spec runtime.Spec) (standbyBox, bool) {
	k := s.shapeOf(spec)
	deadline := time.NewTimer(maxWaitForMaking)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		if p := s.pools[k]; p != nil && len(p.boxes) > 0 {
			b := p.boxes[0]
			p.boxes = p.boxes[1:]
			s.mu.Unlock()
			return b, true
		}
		mk := s.making
		s.mu.Unlock()
		if mk == nil || mk.shape != k {
			return standbyBox{}, false
		}
		select {
		case <-mk.done:
		case <-deadline.C:
			return standbyBox{}, false
		}
	}
}

// run fills the pools until close.
func (s *standby) run() {
	defer close(s.done)
	ctx := context.Background()
	for {
		s.discardStale(ctx)
		spec, mk, ok := s.next()
		if !ok {
			if !s.sleep(0) {
				return
			}
			continue
		}
		box, err := s.create(ctx, spec, mk.cid)
		s.made(ctx, mk, box, err)
		if err != nil {
			s.r.log.WarnContext(ctx, "standby container", "err", err)
			if !s.sleep(time.Second) { // a broken runsc should not spin
				return
			}
		}
	}
}

// sleep waits for d (0: until kicked) or a kick; false once closed.
func (s *standby) sleep(d time.Duration) bool {
	var timer <-chan time.Time
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		timer = t.C
	}
	select {
	case <-s.kick:
	case <-timer:
	case <-s.stop:
		return false
	}
	return true
}

// made ends mk: its box goes into its pool (or is discarded if the shape
// was evicted or the pool closed meanwhile), then waiters are woken.
func (s *standby) made(ctx context.Context, mk *making, box standbyBox, err error) {
	s.mu.Lock()
	p := s.pools[mk.shape]
	keep := err == nil && p != nil && !s.closed
	if keep {
		p.boxes = append(p.boxes, box)
	}
	s.making = nil
	close(mk.done)
	s.mu.Unlock()
	if err == nil && !keep {
		s.discard(ctx, box)
	}
}

// next picks the most recently used shape short of target and records the
// container about to be made for it. Nothing while restores run.
func (s *standby) next() (runtime.Spec, *making, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.busy > 0 {
		return runtime.Spec{}, nil, false
	}
	var best *shapePool
	for _, p := range s.pools {
		if len(p.boxes) < s.target && (best == nil || p.lastUsed.After(best.lastUsed)) {
			best = p
		}
	}
	if best == nil {
		return runtime.Spec{}, nil, false
	}
	s.making = &making{cid: runtime.NewID(), shape: s.shapeOf(best.spec), done: make(chan struct{})}
	return best.spec, s.making, true
}

// create makes a container for spec's shape under id cid, created by
// runsc but not started. On failure nothing is left.
func (s *standby) create(ctx context.Context, spec runtime.Spec, cid string) (box standbyBox, err error) {
	r := s.r
	box = standbyBox{cid: cid, res: withDefaults(spec.Resources, r.cfg.Defaults)}
	box.dir = filepath.Join(r.containersDir(), box.cid)
	defer func() {
		if err != nil {
			s.discard(ctx, box)
		}
	}()
	if err := os.Mkdir(box.dir, 0o700); err != nil {
		return box, fmt.Errorf("standby bundle: %w", err)
	}
	if box.lease, err = r.cfg.Net.Allocate(ctx, box.cid, spec.AllowInternet); err != nil {
		return box, err
	}
	spec.ID = box.cid
	// The filler's specs have no volumes (end): a standby brings none, and
	// restores with volumes make their own container with them.
	vdir, err := r.attachVolumes(box.cid, spec.RootFS, spec.Volumes)
	if err != nil {
		return box, err
	}
	oci := buildSpec(spec, box.res, box.lease, r.cgroupsPath(box.cid), r.pinCPUs(box.res), vdir)
	// Made while other sandboxes run, it yields the CPU to them; adopt
	// gives it its share back.
	shares := uint64(standbyCPUShares)
	oci.Linux.Resources.CPU.Shares = &shares
	if err := writeJSON(filepath.Join(box.dir, "config.json"), oci); err != nil {
		return box, err
	}
	if err := r.runDetached(ctx, r.cfg.Timeout, filepath.Join(box.dir, "runsc.log"),
		"create", "--bundle="+box.dir, "--pid-file="+pidFile(box.dir), box.cid); err != nil {
		return box, err
	}
	// Raised now, so a restore into the box has the headroom from its start.
	return box, r.raiseMemoryLimit(box.cid, box.res)
}

// held returns the container ids the pools hold or are making.
func (s *standby) held() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []string
	for _, p := range s.pools {
		for _, b := range p.boxes {
			ids = append(ids, b.cid)
		}
	}
	for _, b := range s.stale {
		ids = append(ids, b.cid)
	}
	if s.making != nil {
		ids = append(ids, s.making.cid)
	}
	return ids
}

// adopt readies box for the restore of a sandbox: its cgroup gets the
// default CPU weight back.
func (s *standby) adopt(box standbyBox) error {
	path := filepath.Join(cgroupRoot, "cpu", s.r.cgroupsPath(box.cid), "cpu.shares")
	if err := os.WriteFile(path, []byte("1024"), 0o644); err != nil {
		return fmt.Errorf("standby %s: %w", box.cid, err)
	}
	return nil
}

// discard removes a standby container, its network and bundle.
func (s *standby) discard(ctx context.Context, box standbyBox) {
	ctx = context.WithoutCancel(ctx)
	if err := s.r.removeContainer(ctx, box.cid, box.dir); err != nil {
		s.r.log.WarnContext(ctx, "remove standby container", "id", box.cid, "err", err)
	}
}

// discardStale removes the boxes of evicted shapes.
func (s *standby) discardStale(ctx context.Context) {
	s.mu.Lock()
	stale := s.stale
	s.stale = nil
	s.mu.Unlock()
	for _, b := range stale {
		s.discard(ctx, b)
	}
}

// close stops the filler and removes every standby container.
func (s *standby) close(ctx context.Context) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	started := s.started
	close(s.stop)
	s.mu.Unlock()
	if started {
		<-s.done
	}
	s.mu.Lock()
	var all []standbyBox
	for _, p := range s.pools {
		all = append(all, p.boxes...)
	}
	all = append(all, s.stale...)
	s.pools, s.stale = map[shape]*shapePool{}, nil
	s.mu.Unlock()
	for _, b := range all {
		s.discard(ctx, b)
	}
}

// Close removes the standby containers. Sandboxes keep running: a
// restarted daemon reattaches to them.
func (r *Runtime) Close(ctx context.Context) error {
	r.standby.close(ctx)
	r.bg.Wait()
	return nil
}

// containersDir holds the bundles of standby containers (and of sandboxes
// restored into one, named by their container id).
func (r *Runtime) containersDir() string { return filepath.Join(r.cfg.StateDir, "containers") }

// removeUnusedBundles removes container bundles no sandbox uses: the
// standby containers of an earlier daemon, whose runsc containers and
// networks reattach has already removed, and their cgroups.
func (r *Runtime) removeUnusedBundles(ctx context.Context, known map[string]bool) error {
	entries, err := os.ReadDir(r.containersDir())
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("gvisor: %w", err)
	}
	for _, e := range entries {
		if !known[e.Name()] {
			// A create killed with its daemon may have made the cgroups
			// and nothing that runs (its volumes: detachUnknownVolumes).
			r.removeCgroups(ctx, e.Name())
			if err := os.RemoveAll(filepath.Join(r.containersDir(), e.Name())); err != nil {
				return fmt.Errorf("gvisor: %w", err)
			}
		}
	}
	// The crash reports of containers gone meanwhile (a sandbox that died
	// while no daemon ran is removed only now, by the Manager).
	reports, _ := os.ReadDir(r.panicDir())
	for _, e := range reports {
		if cid, ok := strings.CutSuffix(e.Name(), ".log"); ok && !known[cid] {
			os.Remove(filepath.Join(r.panicDir(), e.Name()))
		}
	}
	return nil
}
