package gvisor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/netns"
	"github.com/forkbox/forkbox/internal/runtime"
)

// quietAfterRestore is how long the filler waits after the last restore
// ended: the caller's next steps (an agent's first answers, a burst of
// commands into fresh clones) get the CPU first.
const quietAfterRestore = 200 * time.Millisecond

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
	making  string       // container id being created, for tests
	busy    int          // restores under way: the filler waits for none
	lastEnd time.Time    // when the last restore ended
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
	s.lastEnd = time.Now()
	if s.target <= 0 || s.closed {
		return
	}
	k := s.shapeOf(spec)
	p := s.pools[k]
	if p == nil {
		p = &shapePool{}
		s.pools[k] = p
		s.evictLocked()
	}
	p.spec, p.lastUsed = spec, time.Now()
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
		var oldest shape
		var at time.Time
		for k, p := range s.pools {
			if at.IsZero() || p.lastUsed.Before(at) {
				oldest, at = k, p.lastUsed
			}
		}
		s.stale = append(s.stale, s.pools[oldest].boxes...)
		delete(s.pools, oldest)
	}
}

// take hands out a ready container of spec's shape, if there is one.
func (s *standby) take(spec runtime.Spec) (standbyBox, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.pools[s.shapeOf(spec)]
	if p == nil || len(p.boxes) == 0 {
		return standbyBox{}, false
	}
	b := p.boxes[0]
	p.boxes = p.boxes[1:]
	return b, true
}

// run fills the pools until close.
func (s *standby) run() {
	defer close(s.done)
	ctx := context.Background()
	for {
		s.discardStale(ctx)
		spec, wait, ok := s.next()
		if !ok {
			if !s.sleep(wait) {
				return
			}
			continue
		}
		box, err := s.create(ctx, spec)
		if err != nil {
			s.r.log.WarnContext(ctx, "standby container", "err", err)
			if !s.sleep(time.Second) { // a broken runsc should not spin
				return
			}
			continue
		}
		s.put(ctx, spec, box)
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

// next returns the spec of the most recently used shape short of target,
// or how long to wait before asking again (0: until kicked).
func (s *standby) next() (runtime.Spec, time.Duration, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.busy > 0 {
		return runtime.Spec{}, 0, false
	}
	if quiet := time.Since(s.lastEnd); quiet < quietAfterRestore {
		return runtime.Spec{}, quietAfterRestore - quiet, false
	}
	var best *shapePool
	for _, p := range s.pools {
		if len(p.boxes) < s.target && (best == nil || p.lastUsed.After(best.lastUsed)) {
			best = p
		}
	}
	if best == nil {
		return runtime.Spec{}, 0, false
	}
	return best.spec, 0, true
}

// put adds box to its shape's pool, or discards it if the shape was
// evicted or the pool closed meanwhile.
func (s *standby) put(ctx context.Context, spec runtime.Spec, box standbyBox) {
	s.mu.Lock()
	p := s.pools[s.shapeOf(spec)]
	if p != nil && !s.closed {
		p.boxes = append(p.boxes, box)
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	s.discard(ctx, box)
}

// create makes one standby container for spec's shape under a fresh id.
func (s *standby) create(ctx context.Context, spec runtime.Spec) (box standbyBox, err error) {
	r := s.r
	box = standbyBox{cid: runtime.NewID(), res: withDefaults(spec.Resources, r.cfg.Defaults)}
	box.dir = filepath.Join(r.containersDir(), box.cid)
	s.setMaking(box.cid)
	defer func() {
		if err != nil {
			s.discard(ctx, box)
		}
		s.setMaking("")
	}()
	if err := os.Mkdir(box.dir, 0o700); err != nil {
		return box, fmt.Errorf("standby bundle: %w", err)
	}
	if box.lease, err = r.cfg.Net.Allocate(ctx, box.cid, spec.AllowInternet); err != nil {
		return box, err
	}
	spec.ID = box.cid
	oci := buildSpec(spec, box.res, box.lease, r.cgroupsPath(box.cid))
	if err := writeJSON(filepath.Join(box.dir, "config.json"), oci); err != nil {
		return box, err
	}
	return box, r.runDetached(ctx, r.cfg.Timeout, filepath.Join(box.dir, "runsc.log"),
		"create", "--bundle="+box.dir, box.cid)
}

func (s *standby) setMaking(cid string) {
	s.mu.Lock()
	s.making = cid
	s.mu.Unlock()
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
	if s.making != "" {
		ids = append(ids, s.making)
	}
	return ids
}

// discard removes a standby container, its network and bundle.
func (s *standby) discard(ctx context.Context, box standbyBox) {
	ctx = context.WithoutCancel(ctx)
	s.r.destroy(ctx, box.cid)
	if err := s.r.cfg.Net.Release(ctx, box.cid); err != nil && !errdefs.IsNotFound(err) {
		s.r.log.WarnContext(ctx, "release standby network", "id", box.cid, "err", err)
	}
	if err := os.RemoveAll(box.dir); err != nil {
		s.r.log.WarnContext(ctx, "remove standby bundle", "dir", box.dir, "err", err)
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
// networks reattach has already removed.
func (r *Runtime) removeUnusedBundles(known map[string]bool) error {
	entries, err := os.ReadDir(r.containersDir())
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("gvisor: %w", err)
	}
	for _, e := range entries {
		if !known[e.Name()] {
			if err := os.RemoveAll(filepath.Join(r.containersDir(), e.Name())); err != nil {
				return fmt.Errorf("gvisor: %w", err)
			}
		}
	}
	return nil
}
