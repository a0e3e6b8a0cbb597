package gvisor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/runtime"
)

var _ runtime.MemoryWatcher = (*Runtime)(nil)

// maxRungs bounds the thresholds one watch registers.
const maxRungs = 256

// WatchMemory implements runtime.MemoryWatcher with the v1 memory
// controller's usage thresholds: the kernel signals an eventfd each time
// the sandbox's cgroup usage crosses one, so a quiet watch costs nothing.
// The thresholds are a ladder, one every step from zero to a step past the
// sandbox's memory above the usage found at the start, all registered
// once: registering one waits for an RCU grace period under the cgroup's
// lock, and a watch that re-armed after each crossing was measured blind
// for 700 ms while a hog grew 700 MiB.
func (r *Runtime) WatchMemory(ctx context.Context, id string, step uint64, grew func()) error {
	h, err := r.loadHandle(id)
	if err != nil {
		return err
	}
	dir := filepath.Join(cgroupRoot, "memory", r.cgroupsPath(h.cid()))
	usage, err := os.Open(filepath.Join(dir, "memory.usage_in_bytes"))
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("sandbox %s has no cgroup (not running): %w", id, errdefs.ErrConflict)
	}
	if err != nil {
		return err
	}
	defer usage.Close()
	now, err := readUsage(usage)
	if err != nil {
		return fmt.Errorf("sandbox %s: %w: %w", id, err, errdefs.ErrConflict)
	}
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return err
	}
	ev := os.NewFile(uintptr(efd), "eventfd") // nonblocking: reads go through the poller
	defer ev.Close()                          // the kernel drops the thresholds with it
	stop := context.AfterFunc(ctx, func() { ev.Close() })
	defer stop()
	control := filepath.Join(dir, "cgroup.event_control")
	start := time.Now()
	levels := rungs(now, uint64(h.Resources.MemoryMB)<<20, step)
	for _, level := range levels {
		msg := fmt.Sprintf("%d %d %d", efd, usage.Fd(), level)
		if err := os.WriteFile(control, []byte(msg), 0); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("sandbox %s: memory threshold: %w: %w", id, err, errdefs.ErrConflict)
		}
	}
	r.log.DebugContext(ctx, "memory watch armed", "sandbox", id, "thresholds", len(levels), "took", time.Since(start))
	grew()
	return waitCrossings(ctx, ev, usage, grew)
}

// rungs are the thresholds of a watch starting at usage now: the nearest
// first (registering them all takes a while), every step from a step past
// now+memory down to the first step above zero.
func rungs(now, memory, step uint64) []uint64 {
	var up, down []uint64
	for l := now + step; l <= now+memory+step && len(up) < maxRungs; l += step {
		up = append(up, l)
	}
	for l := now - now%step; l >= step && len(down) < maxRungs; l -= step {
		down = append(down, l)
	}
	var out []uint64
	for i := 0; i < len(up) || i < len(down); i++ {
		if i < len(up) {
			out = append(out, up[i])
		}
		if i < len(down) {
			out = append(out, down[i])
		}
	}
	return out
}

// waitCrossings calls grew for each signal of ev until ctx ends (nil) or
// the cgroup goes: the kernel signals its events then too, and usage can no
// longer be read.
func waitCrossings(ctx context.Context, ev, usage *os.File, grew func()) error {
	var b [8]byte
	for {
		if _, err := ev.Read(b[:]); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if _, err := readUsage(usage); err != nil {
			return fmt.Errorf("%w: %w", err, errdefs.ErrConflict)
		}
		grew()
	}
}

// readUsage reads memory.usage_in_bytes through its open file.
func readUsage(f *os.File) (uint64, error) {
	var b [32]byte
	n, err := f.ReadAt(b[:], 0)
	if n == 0 && err != nil {
		return 0, err
	}
	for n > 0 && (b[n-1] == '\n' || b[n-1] == 0) {
		n--
	}
	return strconv.ParseUint(string(b[:n]), 10, 64)
}
