package client_test

import (
	"bytes"
	"io"
	"sync"
	"time"
)

func ioPipe() (*io.PipeReader, *io.PipeWriter) { return io.Pipe() }

func waitABit() { time.Sleep(5 * time.Millisecond) }

// syncBuffer is a bytes.Buffer safe for a writer and a polling reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
