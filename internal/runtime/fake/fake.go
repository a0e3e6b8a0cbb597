// Package fake is an in-memory runtime.Runtime and runtime.Checkpointer for
// fast tests of code above the runtime (the sandbox manager, the server).
// Sandboxes are http.Handlers supplied by the test and reached through
// in-memory pipes; checkpoints copy state in memory and leave a marker file
// in the image directory so disk GC code has something to find.
package fake

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/runtime"
)

// MarkerFile is the file Checkpoint writes into the image directory.
const MarkerFile = "fake-checkpoint.json"

// Cloner is implemented by handlers that carry state: Checkpoint stores a
// clone and every Restore serves a clone of that, as a real checkpoint
// carries the first process's memory. Handlers without it are created
// afresh with Runtime.Handler on restore.
type Cloner interface {
	Clone() http.Handler
}

// Runtime is the fake backend. Set the exported fields before first use.
type Runtime struct {
	// Handler returns what serves sandbox id (every port reaches it). Nil,
	// or a nil result, makes Dial fail with ErrUnavailable.
	Handler func(id string) http.Handler
	// PortHandler, when set, is used instead of Handler: each port of a
	// sandbox gets its own handler, asked for on the port's first Dial; a
	// nil result means nothing listens there (Dial fails). A restored
	// sandbox asks afresh.
	PortHandler func(id string, port int) http.Handler
	// FailCreate, FailRestore and FailCheckpoint inject failures: a
	// non-nil result is returned and nothing changes.
	FailCreate     func(spec runtime.Spec) error
	FailRestore    func(spec runtime.Spec, imageDir string) error
	FailCheckpoint func(id string, opts runtime.CheckpointOptions) error

	mu        sync.Mutex
	sandboxes map[string]*sandbox // guarded by mu
	images    map[string]image    // by clean image dir; guarded by mu
	nextAddr  int                 // guarded by mu
	// checkpoints numbers checkpoints so every marker is unique; guarded by mu.
	checkpoints int
}

// sandbox is one fake sandbox.
type sandbox struct {
	spec    runtime.Spec
	state   runtime.State
	created time.Time
	addr    netip.Addr
	handler http.Handler
	ln      *pipeListener
	srv     *http.Server
	ports   map[int]*portServer // with PortHandler
	// exited is closed when the sandbox stops (Wait); exit says why.
	exited chan struct{}
	exit   runtime.Exit
	// waiters counts the Waits in progress (Waiting).
	waiters int
	// memory is what GrowMemory added; grown is closed and replaced on
	// each change (WatchMemory).
	memory uint64
	grown  chan struct{}
}

// image is a checkpoint held in memory.
type image struct {
	spec    runtime.Spec
	handler http.Handler // a clone, or nil
	marker  []byte       // the marker file's content, unique per checkpoint
	// filesOnly marks a SaveFilesystem image: its handler is a FilesCloner's
	// CloneFiles, and only CreateFromFilesystem starts from it.
	filesOnly bool
}

var (
	_ runtime.Runtime         = (*Runtime)(nil)
	_ runtime.Checkpointer    = (*Runtime)(nil)
	_ runtime.FilesystemSaver = (*Runtime)(nil)
)

// New returns an empty fake runtime.
func New() *Runtime {
	return &Runtime{sandboxes: make(map[string]*sandbox), images: make(map[string]image)}
}

// Name implements runtime.Runtime.
func (r *Runtime) Name() string { return "fake" }

// Create implements runtime.Runtime.
func (r *Runtime) Create(ctx context.Context, spec runtime.Spec) (runtime.Info, error) {
	if err := validate(spec); err != nil {
		return runtime.Info{}, err
	}
	if r.FailCreate != nil {
		if err := r.FailCreate(spec); err != nil {
			return runtime.Info{}, err
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.sandboxes[spec.ID]; ok {
		return runtime.Info{}, fmt.Errorf("sandbox %s: %w", spec.ID, errdefs.ErrAlreadyExists)
	}
	sb := r.startLocked(spec, r.newHandler(spec.ID))
	return sb.info(), nil
}

// newHandler asks the test for id's handler.
func (r *Runtime) newHandler(id string) http.Handler {
	if r.Handler == nil {
		return nil
	}
	return r.Handler(id)
}

// startLocked registers and starts a running sandbox.
func (r *Runtime) startLocked(spec runtime.Spec, h http.Handler) *sandbox {
	r.nextAddr++
	sb := &sandbox{
		spec: spec, state: runtime.StateRunning, created: time.Now(), handler: h,
		exited: make(chan struct{}),
		grown:  make(chan struct{}),
		// TEST-NET-2: documentation addresses nothing ever dials.
		addr: netip.AddrFrom4([4]byte{198, 51, 100, byte(r.nextAddr%254 + 1)}),
	}
	if h != nil {
		sb.ln = newPipeListener()
		sb.srv = &http.Server{Handler: h}
		go sb.srv.Serve(sb.ln)
	}
	r.sandboxes[spec.ID] = sb
	return sb
}

// stop ends the sandbox's server; it stays known until Delete.
func (sb *sandbox) stop() {
	if sb.state != runtime.StateStopped {
		if sb.exit.Reason == "" {
			sb.exit = runtime.Exit{Reason: runtime.ExitKilled, At: time.Now()}
		}
		close(sb.exited)
	}
	sb.state = runtime.StateStopped
	sb.stopPorts()
	if sb.srv != nil {
		sb.srv.Close()
		sb.ln.Close()
	}
}

func (sb *sandbox) info() runtime.Info {
	return runtime.Info{ID: sb.spec.ID, State: sb.state, Addr: sb.addr, CreatedAt: sb.created}
}

// get returns sandbox id; the caller holds mu.
func (r *Runtime) getLocked(id string) (*sandbox, error) {
	sb, ok := r.sandboxes[id]
	if !ok {
		return nil, fmt.Errorf("sandbox %s: %w", id, errdefs.ErrNotFound)
	}
	return sb, nil
}

// Delete implements runtime.Runtime.
func (r *Runtime) Delete(ctx context.Context, id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	sb, err := r.getLocked(id)
	if err != nil {
		return err
	}
	sb.stop()
	delete(r.sandboxes, id)
	return nil
}

// Kill stops sandbox id as if its supervisor had been killed from
// outside: the sandbox reports StateStopped until Delete, and Wait
// reports runtime.ExitKilled.
func (r *Runtime) Kill(id string) error { return r.KillWith(id, runtime.ExitKilled) }

// Info implements runtime.Runtime.
func (r *Runtime) Info(ctx context.Context, id string) (runtime.Info, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	sb, err := r.getLocked(id)
	if err != nil {
		return runtime.Info{}, err
	}
	return sb.info(), nil
}

// List implements runtime.Runtime, ordered by id.
func (r *Runtime) List(ctx context.Context) ([]runtime.Info, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]runtime.Info, 0, len(r.sandboxes))
	for _, sb := range r.sandboxes {
		out = append(out, sb.info())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// Dial implements runtime.Runtime. A frozen sandbox's connection is only
// served after Thaw.
func (r *Runtime) Dial(ctx context.Context, id string, port int) (net.Conn, error) {
	r.mu.Lock()
	sb, err := r.getLocked(id)
	var ln *pipeListener
	stopped := false
	if err == nil {
		ln, stopped = sb.ln, sb.state == runtime.StateStopped
		if r.PortHandler != nil && !stopped {
			ln = r.portListenerLocked(sb, port)
		}
	}
	r.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if ln == nil || stopped {
		return nil, fmt.Errorf("dial %s port %d: nothing listening: %w", id, port, errdefs.ErrUnavailable)
	}
	c, ok := ln.dial()
	if !ok {
		return nil, fmt.Errorf("dial %s port %d: sandbox stopped: %w", id, port, errdefs.ErrUnavailable)
	}
	return c, nil
}

// Stats implements runtime.Runtime with made-up but plausible numbers.
func (r *Runtime) Stats(ctx context.Context, id string) (runtime.Stats, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	sb, err := r.getLocked(id)
	if err != nil {
		return runtime.Stats{}, err
	}
	if sb.state == runtime.StateStopped {
		return runtime.Stats{}, fmt.Errorf("sandbox %s is stopped: %w", id, errdefs.ErrConflict)
	}
	return runtime.Stats{
		CPUUsage:         time.Since(sb.created) / 100,
		MemoryBytes:      32 << 20,
		MemoryLimitBytes: uint64(max(sb.spec.Resources.MemoryMB, 512)) << 20,
		Pids:             1,
	}, nil
}

// Freeze implements runtime.Runtime.
func (r *Runtime) Freeze(ctx context.Context, id string) error {
	return r.transition(id, runtime.StateRunning, runtime.StatePaused)
}

// Thaw implements runtime.Runtime.
func (r *Runtime) Thaw(ctx context.Context, id string) error {
	return r.transition(id, runtime.StatePaused, runtime.StateRunning)
}

// transition moves id from one state to another, ErrConflict otherwise.
func (r *Runtime) transition(id string, from, to runtime.State) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	sb, err := r.getLocked(id)
	if err != nil {
		return err
	}
	if sb.state != from {
		return fmt.Errorf("sandbox %s is %s, not %s: %w", id, sb.state, from, errdefs.ErrConflict)
	}
	sb.state = to
	if sb.ln != nil {
		sb.ln.setFrozen(to == runtime.StatePaused)
	}
	sb.freezePorts(to == runtime.StatePaused)
	return nil
}

// validate mirrors the real backends' checks.
func validate(spec runtime.Spec) error {
	if err := runtime.ValidateID(spec.ID); err != nil {
		return err
	}
	if fi, err := os.Stat(spec.RootFS); err != nil || !fi.IsDir() {
		return fmt.Errorf("rootfs %q is not a directory: %w", spec.RootFS, errdefs.ErrInvalidArgument)
	}
	return nil
}

// writeMarker records a checkpoint in imageDir.
func writeMarker(imageDir string, spec runtime.Spec, seq int) ([]byte, error) {
	b, err := json.Marshal(map[string]any{"id": spec.ID, "rootfs": spec.RootFS, "checkpoint": seq})
	if err != nil {
		return nil, err
	}
	return b, os.WriteFile(filepath.Join(imageDir, MarkerFile), b, 0o644)
}
