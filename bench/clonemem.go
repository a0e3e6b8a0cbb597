package main

import (
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"time"
	"unsafe"

	"github.com/forkbox/forkbox/client"
)

// cloneMemK is how many clones the clone-memory rows measure at once.
const cloneMemK = 10

// cloneMemKeys are the clone-memory rows: the source's host memory, its
// cloneMemK clones' together, and their ratio.
var cloneMemKeys = []string{"clone.256.mem.src", "clone.256.mem.10", "clone.256.mem.ratio"}

// cloneMemSettle is how long clones idle before they are measured: long
// enough for a restore that loads its image in the background to finish.
const cloneMemSettle = 3 * time.Second

// setCloneMem records one clone-memory reading on side.
func setCloneMem(res *Results, side Side, src hostMem, clones []hostMem, pageCache int64) {
	total := pageCache
	for _, m := range clones {
		total += m.Total()
	}
	res.Set(cloneMemKeys[0], side, samples{mib(src.Total())})
	res.Set(cloneMemKeys[1], side, samples{mib(total)})
	res.Set(cloneMemKeys[2], side, samples{float64(total) / float64(src.Total())})
	slog.Info("clone memory", "side", side, "source MiB", mib(src.Total()), "clones MiB", mib(total), "page cache MiB", mib(pageCache))
}

// benchCloneMemory: Clone ×cloneMemK of a running 256 MiB source (every
// page touched before, none after), then the host memory of the clones,
// every page once (as the memory section counts one sandbox), plus the
// page cache of the image files they read their pages from.
func (b *fbBench) benchCloneMemory(ctx context.Context, src *client.Sandbox) {
	srcMem, err := b.measureHost(src.SandboxID)
	if err != nil {
		b.fail(err, cloneMemKeys...)
		return
	}
	images := filepath.Join(b.d.DataDir, "images")
	before := pagesFiles(images)
	res, err := b.c.Clone(ctx, src.SandboxID, client.CloneOptions{Count: cloneMemK, Strict: true, Timeout: sandboxTTL})
	if err != nil {
		b.fail(err, cloneMemKeys...)
		return
	}
	defer func() {
		for _, sb := range res.Sandboxes {
			b.kill(ctx, sb.SandboxID)
		}
	}()
	clones := make([]hostMem, len(res.Sandboxes))
	for _, sb := range res.Sandboxes {
		if err := echoesHi(ctx, sb); err != nil {
			b.fail(err, cloneMemKeys...)
			return
		}
	}
	time.Sleep(cloneMemSettle)
	for i, sb := range res.Sandboxes {
		if clones[i], err = b.measureHost(sb.SandboxID); err != nil {
			b.fail(err, cloneMemKeys...)
			return
		}
	}
	var cache int64
	for p := range pagesFiles(images) {
		if !before[p] { // the clone's image, not older ones
			cache += residentOf(p)
		}
	}
	setCloneMem(b.res, FB, srcMem, clones, cache)
}

// cloneMemory is the raw side of benchCloneMemory: cloneMemK restores of
// image (of source src), measured after they answered and settled.
func (b *rawBench) cloneMemory(ctx context.Context, src *rawBox, image string) {
	srcMem, err := measureHost(src.id)
	if err != nil {
		b.fail(err, cloneMemKeys...)
		return
	}
	boxes := make([]*rawBox, cloneMemK)
	defer func() {
		for _, box := range boxes {
			if box != nil {
				b.kill(ctx, box)
			}
		}
	}()
	for i := range boxes {
		if boxes[i], err = b.prepare(ctx, b.nets[1+i], src.argv); err != nil {
			b.fail(err, cloneMemKeys...)
			return
		}
	}
	if err := concurrently(cloneMemK, func(i int) error {
		var err error
		if boxes[i].out, err = b.r.restore(ctx, boxes[i].id, boxes[i].bundle, image); err != nil {
			return err
		}
		return b.r.echo(ctx, boxes[i].id)
	}); err != nil {
		b.fail(err, cloneMemKeys...)
		return
	}
	time.Sleep(cloneMemSettle)
	clones := make([]hostMem, cloneMemK)
	for i, box := range boxes {
		if clones[i], err = measureHost(box.id); err != nil {
			b.fail(err, cloneMemKeys...)
			return
		}
	}
	var cache int64
	for p := range pagesFiles(image) {
		cache += residentOf(p)
	}
	setCloneMem(b.res, Raw, srcMem, clones, cache)
}

// pagesFiles is the set of checkpoint pages files (pages.img) under root.
func pagesFiles(root string) map[string]bool {
	out := map[string]bool{}
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && d.Name() == "pages.img" {
			out[p] = true
		}
		return nil
	})
	return out
}

// residentOf is how much of pages file p is in the host page cache:
// restores that read their pages from there on demand share those pages,
// which no sandbox's PSS or memory file shows. An eager restore copied
// them, but the checkpoint that wrote the file left them cached too.
func residentOf(p string) int64 {
	n, err := residentBytes(p)
	if err != nil {
		slog.Warn("page cache of image", "file", p, "err", err)
	}
	return n
}

// residentBytes counts the pages of file path in the page cache (mincore
// of a read-only mapping, which faults nothing in).
func residentBytes(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || fi.Size() == 0 {
		return 0, err
	}
	data, err := syscall.Mmap(int(f.Fd()), 0, int(fi.Size()), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return 0, fmt.Errorf("mmap: %w", err)
	}
	defer syscall.Munmap(data)
	page := int64(os.Getpagesize())
	vec := make([]byte, (fi.Size()+page-1)/page)
	if _, _, errno := syscall.Syscall(syscall.SYS_MINCORE, uintptr(unsafe.Pointer(&data[0])), uintptr(len(data)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		return 0, fmt.Errorf("mincore: %w", errno)
	}
	var n int64
	for _, v := range vec {
		n += int64(v & 1)
	}
	return n * page, nil
}
