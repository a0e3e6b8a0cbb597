package agent

import (
	"archive/tar"
	"bytes"
	"fmt"
	"sync"
)

// Small files are written by a few workers while the stream is read on:
// a change set is mostly small files, each a handful of system calls, and
// in gVisor those overlap well across the sandbox's CPUs.
const (
	stageWorkers = 2
	// maxQueuedFile is the largest file read whole into a queued job;
	// bigger ones are written straight from the stream.
	maxQueuedFile = 1 << 20
	// maxStagedBytes bounds what the queue holds at once.
	maxStagedBytes = 32 << 20
)

type stageJob struct {
	path, file string
	hdr        *tar.Header
	data       []byte
}

// stagers is the worker pool; the first error wins.
type stagers struct {
	jobs   chan stageJob
	wg     sync.WaitGroup
	budget chan struct{} // one token per queued MiB (rounded up)
	mu     sync.Mutex
	err    error
}

func newStagers() *stagers {
	w := &stagers{jobs: make(chan stageJob, 64), budget: make(chan struct{}, maxStagedBytes>>20)}
	for range stageWorkers {
		w.wg.Add(1)
		go w.work()
	}
	return w
}

func tokens(n int) int { return max(1, (n+(1<<20)-1)>>20) }

func (w *stagers) work() {
	defer w.wg.Done()
	for j := range w.jobs {
		err := stageFile(j.file, j.hdr, bytes.NewReader(j.data))
		for range tokens(len(j.data)) {
			<-w.budget
		}
		if err != nil {
			w.mu.Lock()
			if w.err == nil {
				w.err = fmt.Errorf("%s: %w", j.path, err)
			}
			w.mu.Unlock()
		}
	}
}

// add queues a file, waiting while the queue holds too much; it returns
// a worker's error as soon as there is one.
func (w *stagers) add(p, file string, hdr *tar.Header, data []byte) error {
	w.mu.Lock()
	err := w.err
	w.mu.Unlock()
	if err != nil {
		return err
	}
	for range tokens(len(data)) {
		w.budget <- struct{}{}
	}
	w.jobs <- stageJob{path: p, file: file, hdr: hdr, data: data}
	return nil
}

// wait ends the pool and returns the first error.
func (w *stagers) wait() error {
	close(w.jobs)
	w.wg.Wait()
	return w.err
}
