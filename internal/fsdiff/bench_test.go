package fsdiff

import (
	"archive/tar"
	"fmt"
	"strings"
	"sync"
	"testing"
)

// BenchmarkDiffUppers: two upper layers of 8,000 files of 1 KiB over one
// lower, 1,000 of them changed (the bench/diff shape without the runtime).
func BenchmarkDiffUppers(b *testing.B) {
	t := &testing.T{}
	lw := lowerTree(t)
	body := strings.Repeat("x", 1000)
	var p, q []hdr
	p = append(p, dir("./home/"), dir("./home/user/"), dir("./home/user/tree/"))
	q = append(q, p...)
	for d := range 80 {
		p = append(p, dir(fmt.Sprintf("./home/user/tree/d%02d/", d)))
		q = append(q, dir(fmt.Sprintf("./home/user/tree/d%02d/", d)))
		for f := range 100 {
			name := fmt.Sprintf("./home/user/tree/d%02d/f%03d", d, f)
			p = append(p, file(name, body))
			if f < 12 && d*12+f < 1000 {
				q = append(q, file(name, body+"!"))
			} else {
				q = append(q, file(name, body))
			}
		}
	}
	_ = tar.TypeReg
	pa, err := OpenLayer(writeLayerB(b, p...))
	if err != nil {
		b.Fatal(err)
	}
	qa, err := OpenLayer(writeLayerB(b, q...))
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		pa.resetHashes()
		qa.resetHashes()
		page, err := Diff(Tree{pa, lw}, Tree{qa, lw}, Options{})
		if err != nil || len(page.Changes) != 960 {
			b.Fatalf("%d changes, %v", len(page.Changes), err)
		}
	}
}

func (l *Layer) resetHashes() {
	for _, e := range l.entries {
		e.SHA256, e.hashOnce = "", sync.Once{}
	}
}
