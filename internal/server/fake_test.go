package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/runtime"
)

var (
	_ runtime.Runtime      = (*fakeRuntime)(nil)
	_ runtime.Checkpointer = (*fakeRuntime)(nil)
)

// fakeRuntime is a runtime.Runtime and runtime.Checkpointer whose sandboxes are http.Handlers: Dial
// serves the handler for (id, port) over a net.Pipe. A nil handler means
// nothing listens on that port.
type fakeRuntime struct {
	handler func(id string, port int) http.Handler
	// failRestore, when set, injects Restore failures: a non-nil result is
	// returned and nothing is created. n counts Restore calls from 1.
	failRestore func(n int64, spec runtime.Spec) error
	restores    atomic.Int64

	mu    sync.Mutex
	boxes map[string]*fakeBox
}

type fakeBox struct {
	info      runtime.Info
	listeners map[int]*pipeListener
	servers   []*http.Server
}

// stop closes the sandbox's listeners and every connection they accepted.
func (b *fakeBox) stop() {
	for _, l := range b.listeners {
		l.Close()
	}
	for _, srv := range b.servers {
		srv.Close()
	}
	b.listeners, b.servers = map[int]*pipeListener{}, nil
}

func newFakeRuntime(handler func(id string, port int) http.Handler) *fakeRuntime {
	return &fakeRuntime{handler: handler, boxes: map[string]*fakeBox{}}
}

func (f *fakeRuntime) Name() string { return "fake" }

func (f *fakeRuntime) Create(ctx context.Context, spec runtime.Spec) (runtime.Info, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, dup := f.boxes[spec.ID]; dup {
		return runtime.Info{}, fmt.Errorf("sandbox %s: %w", spec.ID, errdefs.ErrAlreadyExists)
	}
	info := runtime.Info{ID: spec.ID, State: runtime.StateRunning, CreatedAt: time.Now()}
	f.boxes[spec.ID] = &fakeBox{info: info, listeners: map[int]*pipeListener{}}
	return info, nil
}

func (f *fakeRuntime) Delete(ctx context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, ok := f.boxes[id]
	if !ok {
		return fmt.Errorf("sandbox %s: %w", id, errdefs.ErrNotFound)
	}
	b.stop()
	delete(f.boxes, id)
	return nil
}

func (f *fakeRuntime) Info(ctx context.Context, id string) (runtime.Info, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, ok := f.boxes[id]
	if !ok {
		return runtime.Info{}, fmt.Errorf("sandbox %s: %w", id, errdefs.ErrNotFound)
	}
	return b.info, nil
}

func (f *fakeRuntime) List(ctx context.Context) ([]runtime.Info, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []runtime.Info
	for _, b := range f.boxes {
		out = append(out, b.info)
	}
	return out, nil
}

func (f *fakeRuntime) Dial(ctx context.Context, id string, port int) (net.Conn, error) {
	l, err := f.listener(id, port)
	if err != nil {
		return nil, err
	}
	client, srv := net.Pipe()
	select {
	case l.conns <- srv:
		return client, nil
	case <-l.done:
		return nil, fmt.Errorf("dial %s:%d: connection refused", id, port)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// listener returns the (lazily started) server of a sandbox's port.
func (f *fakeRuntime) listener(id string, port int) (*pipeListener, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, ok := f.boxes[id]
	if !ok {
		return nil, fmt.Errorf("sandbox %s: %w", id, errdefs.ErrNotFound)
	}
	if l, ok := b.listeners[port]; ok {
		return l, nil
	}
	h := f.handler(id, port)
	if h == nil || b.info.State != runtime.StateRunning {
		return nil, fmt.Errorf("dial %s:%d: connection refused", id, port)
	}
	l := &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
	b.listeners[port] = l
	srv := &http.Server{Handler: h}
	b.servers = append(b.servers, srv)
	go srv.Serve(l)
	return l, nil
}

func (f *fakeRuntime) Stats(ctx context.Context, id string) (runtime.Stats, error) {
	if _, err := f.Info(ctx, id); err != nil {
		return runtime.Stats{}, err
	}
	return runtime.Stats{CPUUsage: 10 * time.Millisecond, MemoryBytes: 64 << 20, MemoryLimitBytes: 512 << 20, Pids: 3}, nil
}

func (f *fakeRuntime) Freeze(ctx context.Context, id string) error { return nil }
func (f *fakeRuntime) Thaw(ctx context.Context, id string) error   { return nil }

// closeAll stops every fake sandbox's servers.
func (f *fakeRuntime) closeAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, b := range f.boxes {
		b.stop()
	}
}

// fakeImageFile is what Checkpoint writes into an image directory.
const fakeImageFile = "fake-image.json"

// fakeImage is the content of fakeImageFile.
type fakeImage struct {
	Source string `json:"source"`
}

// Checkpoint implements runtime.Checkpointer: it writes a small image file
// and, unless asked to leave it running, stops the sandbox (kept until
// Delete, as a real backend does).
func (f *fakeRuntime) Checkpoint(ctx context.Context, id, imageDir string, opts runtime.CheckpointOptions) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, ok := f.boxes[id]
	if !ok {
		return fmt.Errorf("sandbox %s: %w", id, errdefs.ErrNotFound)
	}
	if b.info.State != runtime.StateRunning {
		return fmt.Errorf("sandbox %s is %s: %w", id, b.info.State, errdefs.ErrConflict)
	}
	data, _ := json.Marshal(fakeImage{Source: id})
	if err := os.WriteFile(filepath.Join(imageDir, fakeImageFile), data, 0o600); err != nil {
		return err
	}
	if !opts.LeaveRunning {
		b.stop()
		b.info.State = runtime.StateStopped
	}
	return nil
}

// Restore implements runtime.Checkpointer: it starts spec.ID afresh from
// an image Checkpoint wrote (the sandbox handlers hold no state to carry).
func (f *fakeRuntime) Restore(ctx context.Context, spec runtime.Spec, imageDir string) (runtime.Info, error) {
	n := f.restores.Add(1)
	if f.failRestore != nil {
		if err := f.failRestore(n, spec); err != nil {
			return runtime.Info{}, err
		}
	}
	data, err := os.ReadFile(filepath.Join(imageDir, fakeImageFile))
	if err != nil {
		return runtime.Info{}, fmt.Errorf("read image: %w", err)
	}
	var img fakeImage
	if err := json.Unmarshal(data, &img); err != nil || img.Source == "" {
		return runtime.Info{}, fmt.Errorf("bad image in %s: %v", imageDir, err)
	}
	return f.Create(ctx, spec)
}

// Replace implements runtime.Checkpointer: a Delete, then a Restore.
func (f *fakeRuntime) Replace(ctx context.Context, spec runtime.Spec, imageDir string) (runtime.Info, error) {
	if err := f.Delete(ctx, spec.ID); err != nil {
		return runtime.Info{}, err
	}
	return f.Restore(ctx, spec, imageDir)
}

// pipeListener is a net.Listener fed by Dial.
type pipeListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, errors.New("listener closed")
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }
