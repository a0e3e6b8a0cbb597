package gvisor

import (
	"context"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/forkbox/forkbox/internal/runtime"
	"github.com/forkbox/forkbox/internal/runtime/runtimetest"
)

// TestCheckpointUnderIncomingTraffic: checkpoints that stop the sandbox
// (which remove its network interfaces first) and restores keep working
// while datagrams from the host arrive throughout. The pinned gVisor
// removes each interface under the network stack's lock while waiting for
// the link's packet dispatcher, which needs that lock to deliver a packet;
// patches/gvisor/0002 detaches the link after the lock is released. Without
// it this test hung in `runsc checkpoint` in one CI run and in 1 of 6 runs
// on a loaded machine here (TestGvisorPatchTests holds the deterministic
// test of the patch).
func TestCheckpointUnderIncomingTraffic(t *testing.T) {
	r := newRuntime(t).(*Runtime)
	r.cfg.Timeout = 20 * time.Second
	spec := testSpec(runtimetest.NewID(), false)
	startSandbox(t, r, spec)
	var stop atomic.Bool
	var sent atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // datagrams to a closed port: each reaches the network stack
		defer wg.Done()
		b := make([]byte, 32)
		for !stop.Load() {
			info, err := r.Info(context.Background(), spec.ID)
			if err != nil || !info.Addr.IsValid() {
				time.Sleep(time.Millisecond)
				continue
			}
			c, err := net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(info.Addr, 9)))
			if err != nil {
				continue
			}
			for range 2000 {
				if _, err := c.Write(b); err == nil {
					sent.Add(1)
				}
			}
			c.Close()
		}
	}()
	defer func() { stop.Store(true); wg.Wait() }()
	for i := range 5 {
		time.Sleep(300 * time.Millisecond) // traffic flowing again
		dir := t.TempDir()
		start := time.Now()
		if err := r.Checkpoint(context.Background(), spec.ID, dir, runtime.CheckpointOptions{}); err != nil {
			t.Fatalf("checkpoint %d under incoming datagrams (%d sent): %v", i+1, sent.Load(), err)
		}
		t.Logf("checkpoint %d under incoming datagrams: %v (%d sent)", i+1, time.Since(start), sent.Load())
		if err := r.Delete(context.Background(), spec.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := r.Restore(context.Background(), spec, dir); err != nil {
			t.Fatalf("restore %d: %v", i+1, err)
		}
	}
}
