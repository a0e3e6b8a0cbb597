package fsdiff

import (
	"errors"
	"io"
	"os"
)

// tarFile reads a layer's tar for archive/tar through a buffer, keeping
// the logical offset (after Next: where the entry's data starts) and
// seeking over contents, so reading the headers of a layer of large
// files reads the headers only.
type tarFile struct {
	f     *os.File
	buf   []byte
	start int64 // file offset of buf[0]
	r, w  int   // unread part of buf
	off   int64 // logical offset
}

func newTarFile(f *os.File) *tarFile { return &tarFile{f: f, buf: make([]byte, 64<<10)} }

func (t *tarFile) Read(p []byte) (int, error) {
	if t.r == t.w {
		n, err := t.f.ReadAt(t.buf, t.off)
		if n == 0 {
			if err == nil || errors.Is(err, io.EOF) {
				return 0, io.EOF
			}
			return 0, err
		}
		t.start, t.r, t.w = t.off, 0, n
	}
	n := copy(p, t.buf[t.r:t.w])
	t.r += n
	t.off += int64(n)
	return n, nil
}

// Seek supports what archive/tar asks: current and start relative.
func (t *tarFile) Seek(offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		offset += t.off
	case io.SeekEnd:
		fi, err := t.f.Stat()
		if err != nil {
			return 0, err
		}
		offset += fi.Size()
	}
	if offset < 0 {
		return 0, errors.New("seek before the start")
	}
	t.off = offset
	if offset >= t.start && offset < t.start+int64(t.w) {
		t.r = int(offset - t.start)
	} else {
		t.r, t.w = 0, 0
	}
	return offset, nil
}
