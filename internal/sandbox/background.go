package sandbox

import (
	"context"
	"sync"
	"sync/atomic"
)

// background tracks the operations a request starts and does not wait
// for (Pause, PauseFilesystem): the sandbox is already reported paused, so
// a daemon that stops must let them finish or its next start finds the
// sandbox half-paused and lost.
type background struct {
	wg sync.WaitGroup
	n  atomic.Int32
}

// goBackground runs fn as a tracked background operation.
func (m *Manager) goBackground(fn func()) {
	m.bg.n.Add(1)
	m.bg.wg.Go(func() {
		defer m.bg.n.Add(-1)
		fn()
	})
}

// InBackground is the number of background operations (pauses a request
// started) still running.
func (m *Manager) InBackground() int { return int(m.bg.n.Load()) }

// WaitBackground waits until the background operations are done or ctx
// ends (then it returns ctx's error). Call it once no request can start
// new ones (the HTTP server is shut down).
func (m *Manager) WaitBackground(ctx context.Context) error {
	done := make(chan struct{})
	go func() { m.bg.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
