package runtimetest

import (
	"archive/tar"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/runtime"
)

// testUpperLayer: a running sandbox's upper layer is a tar holding what
// it wrote, the sandbox keeps running, an unknown id is ErrNotFound.
func testUpperLayer(s *suite) {
	w, ok := s.rt.(runtime.UpperLayerWriter)
	if !ok {
		s.t.Fatalf("%s does not implement runtime.UpperLayerWriter", s.rt.Name())
	}
	ctx := context.Background()
	id := NewID()
	s.create(id)
	s.mustGet(id, "/write?path=/root/upper.txt&data=layered")
	file := filepath.Join(s.t.TempDir(), "upper.tar")
	start := time.Now()
	if err := w.WriteUpperLayer(ctx, id, file); err != nil {
		s.t.Fatalf("WriteUpperLayer: %v", err)
	}
	s.t.Logf("timing: %s write upper layer %v", s.rt.Name(), time.Since(start))
	s.wantState(id, runtime.StateRunning)
	if got := s.mustGet(id, "/read?path=/root/upper.txt"); got != "layered" {
		s.t.Errorf("file after the tar = %q", got)
	}
	if got := tarFile(s, file, "./root/upper.txt"); got != "layered" {
		s.t.Errorf("upper layer holds %q at ./root/upper.txt, want layered", got)
	}
	err := w.WriteUpperLayer(ctx, NewID(), filepath.Join(s.t.TempDir(), "x.tar"))
	if !errdefs.IsNotFound(err) {
		s.t.Errorf("WriteUpperLayer of an unknown id: %v, want ErrNotFound", err)
	}
}

// tarFile returns the content of entry name in the tar at file.
func tarFile(s *suite, file, name string) string {
	f, err := os.Open(file)
	if err != nil {
		s.t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return ""
		}
		if err != nil {
			s.t.Fatalf("read upper layer: %v", err)
		}
		if hdr.Name == name {
			b, _ := io.ReadAll(tr)
			return string(b)
		}
	}
}
