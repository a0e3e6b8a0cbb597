package client_test

import (
	"io"
	"time"
)

func ioPipe() (*io.PipeReader, *io.PipeWriter) { return io.Pipe() }

func waitABit() { time.Sleep(5 * time.Millisecond) }
