package store

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/forkbox/forkbox/internal/store/pgtest"
)

// The store's hot paths on both engines (docs/benchmarks.md):
//
//	go test -run '^$' -bench . -benchtime 2000x ./internal/store/
var benchOpeners = []struct {
	name string
	open func(b *testing.B) (*Store, error)
}{
	{"sqlite", func(b *testing.B) (*Store, error) {
		return OpenPath(context.Background(), filepath.Join(b.TempDir(), "forkbox.db"))
	}},
	{"postgres", func(b *testing.B) (*Store, error) {
		return OpenURL(context.Background(), pgtest.Shared(b).NewDatabase(b))
	}},
}

func eachBenchBackend(b *testing.B, bench func(b *testing.B, s *Store)) {
	for _, o := range benchOpeners {
		b.Run(o.name, func(b *testing.B) {
			s, err := o.open(b)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			bench(b, s)
		})
	}
}

func benchSandbox(i int) *Sandbox {
	return &Sandbox{ID: fmt.Sprintf("sb%06d", i), TemplateID: "base", State: "running", CPUCount: 2, MemoryMB: 512,
		Metadata: map[string]string{"user": "bench", "n": fmt.Sprint(i)}, StartedAt: time.Unix(int64(i), 0).UTC(),
		EndAt: time.Unix(int64(i)+300, 0).UTC(), RootFS: "/var/lib/forkbox/templates/base/rootfs"}
}

func BenchmarkPutSandbox(b *testing.B) {
	eachBenchBackend(b, func(b *testing.B, s *Store) {
		ctx := context.Background()
		for i := 0; b.Loop(); i++ {
			if err := s.PutSandbox(ctx, benchSandbox(i%500)); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func fill(b *testing.B, s *Store, n int) {
	for i := range n {
		if err := s.PutSandbox(context.Background(), benchSandbox(i)); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkGetSandbox(b *testing.B) {
	eachBenchBackend(b, func(b *testing.B, s *Store) {
		fill(b, s, 500)
		ctx := context.Background()
		for i := 0; b.Loop(); i++ {
			if _, err := s.GetSandbox(ctx, fmt.Sprintf("sb%06d", i%500)); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkListSandboxes lists a page of 100 running sandboxes out of 500.
func BenchmarkListSandboxes(b *testing.B) {
	eachBenchBackend(b, func(b *testing.B, s *Store) {
		fill(b, s, 500)
		ctx := context.Background()
		for b.Loop() {
			page, _, err := s.ListSandboxes(ctx, SandboxFilter{States: []string{"running"}, Limit: 100})
			if err != nil || len(page) != 100 {
				b.Fatal(len(page), err)
			}
		}
	})
}
