package sandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"
)

// wakeLog records the memory wakes each sandbox's agent got.
type wakeLog struct {
	mu    sync.Mutex
	steps map[string][]uint64
}

func (l *wakeLog) get(id string) []uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]uint64(nil), l.steps[id]...)
}

// agentWith serves POST /forkbox/memory-wake into l and the rest as
// memAgent does.
func (l *wakeLog) agentWith(e *env) func(id string) http.Handler {
	return func(id string) http.Handler {
		inner := &memAgent{inits: &e.inits}
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/forkbox/memory-wake" {
				inner.ServeHTTP(w, r)
				return
			}
			var body struct{ Step uint64 }
			json.NewDecoder(r.Body).Decode(&body)
			l.mu.Lock()
			l.steps[id] = append(l.steps[id], body.Step)
			l.mu.Unlock()
			w.WriteHeader(http.StatusNoContent)
		})
	}
}

// TestMemoryWake: a running sandbox's agent hears its step (1/32 of its
// memory, at least 16 MiB) at once, then once each time its memory moved by
// a step either way, and nothing for less; a Manager with NoMemoryWake posts
// nothing.
func TestMemoryWake(t *testing.T) {
	e := newEnv(t)
	l := &wakeLog{steps: map[string][]uint64{}}
	e.rt.Handler = l.agentWith(e)
	sb := e.create(t, CreateRequest{})
	want := func(wakes int) {
		t.Helper()
		step := uint64(16 << 20) // 256 MiB: 8 MiB is below the floor
		deadline := time.Now().Add(2 * time.Second)
		for {
			got := l.get(sb.ID)
			ok := len(got) == wakes
			for _, s := range got {
				ok = ok && s == step
			}
			if ok {
				time.Sleep(50 * time.Millisecond) // and no more come
				if got := l.get(sb.ID); len(got) == wakes {
					return
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("wakes %v, want %d of %d", got, wakes, step)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	want(1)
	for _, tt := range []struct {
		grow  int64
		wakes int
	}{
		{8 << 20, 1}, {10 << 20, 2}, {4 << 20, 2}, {-20 << 20, 3},
	} {
		if err := e.rt.GrowMemory(sb.ID, tt.grow); err != nil {
			t.Fatal(err)
		}
		t.Run(fmt.Sprintf("grow %d MiB", tt.grow>>20), func(t *testing.T) { want(tt.wakes) })
	}

	e.m.mu.Lock()
	e.m.cfg.NoMemoryWake = true
	e.m.mu.Unlock()
	off := e.create(t, CreateRequest{})
	e.rt.GrowMemory(off.ID, 64<<20)
	time.Sleep(200 * time.Millisecond)
	if got := l.get(off.ID); len(got) != 0 {
		t.Errorf("NoMemoryWake: wakes %v", got)
	}
}

// A pooled sandbox's memory is watched while it waits in the pool; the
// create that takes it stops that watch before its /init, so only the
// sandbox's own watch wakes it afterwards (one announce, then a wake a
// step).
func TestMemoryWakePooled(t *testing.T) {
	e := newEnv(t)
	l := &wakeLog{steps: map[string][]uint64{}}
	e.rt.Handler = l.agentWith(e)
	warmBase(t, e)
	e.m.cfg.PoolSize, e.m.cfg.PoolTemplates = 1, []string{"base"}
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { e.m.Run(runCtx); close(done) }()
	defer func() { stop(); <-done }()
	var pooled string
	deadline := time.Now().Add(5 * time.Second)
	for pooled == "" || len(l.get(pooled)) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no pooled sandbox announced its watch: pooled %q, wakes %v", pooled, l.get(pooled))
		}
		time.Sleep(5 * time.Millisecond)
		e.m.pool.mu.Lock()
		if r := e.m.pool.ready["base"]; len(r) > 0 {
			pooled = r[0].id
		}
		e.m.pool.mu.Unlock()
	}
	sb := e.create(t, CreateRequest{})
	if sb.ID != pooled {
		t.Fatalf("create did not take the pooled %s: %s", pooled, sb.ID)
	}
	e.m.pooledMem.mu.Lock()
	_, watched := e.m.pooledMem.stops[pooled]
	e.m.pooledMem.mu.Unlock()
	if watched {
		t.Errorf("the pooled watch of %s outlived its hand-over", pooled)
	}
	waitWakes := func(n int) {
		t.Helper()
		deadline := time.Now().Add(2 * time.Second)
		for len(l.get(sb.ID)) < n && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		time.Sleep(50 * time.Millisecond) // and no more come
		if got := l.get(sb.ID); len(got) != n {
			t.Fatalf("wakes %v, want %d", got, n)
		}
	}
	waitWakes(2) // the pooled watch's announce, then the sandbox's own
	if err := e.rt.GrowMemory(sb.ID, 20<<20); err != nil {
		t.Fatal(err)
	}
	waitWakes(3) // one wake for the step: the pooled watch is gone
}

// An agent that answers the announce 410 (its sandbox is too small for
// its guard to wait) is not woken again.
func TestMemoryWakeGone(t *testing.T) {
	e := newEnv(t)
	var mu sync.Mutex
	posts := 0
	e.rt.Handler = func(id string) http.Handler {
		inner := &memAgent{inits: &e.inits}
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/forkbox/memory-wake" {
				inner.ServeHTTP(w, r)
				return
			}
			mu.Lock()
			posts++
			mu.Unlock()
			w.WriteHeader(http.StatusGone)
		})
	}
	sb := e.create(t, CreateRequest{})
	time.Sleep(100 * time.Millisecond)
	e.rt.GrowMemory(sb.ID, 64<<20)
	time.Sleep(100 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	if posts != 1 {
		t.Errorf("%d wakes posted, want the announce only", posts)
	}
}

// While an operation holds a sandbox (a pause's checkpoint, a snapshot)
// no wake is sent into it: the checkpoint's own writes grow its cgroup,
// and a packet arriving while runsc saves the network stack can deadlock
// the save. Once the operation ends, wakes come again.
func TestMemoryWakeNotDuringOperations(t *testing.T) {
	e := newEnv(t)
	l := &wakeLog{steps: map[string][]uint64{}}
	e.rt.Handler = l.agentWith(e)
	sb := e.create(t, CreateRequest{})
	deadline := time.Now().Add(2 * time.Second)
	for len(l.get(sb.ID)) == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	ctx := context.Background()
	o, err := e.m.claim(ctx, sb.ID, StateSnapshotting, StateRunning)
	if err != nil {
		t.Fatal(err)
	}
	e.rt.GrowMemory(sb.ID, 20<<20)
	time.Sleep(100 * time.Millisecond)
	if got := l.get(sb.ID); len(got) != 1 {
		t.Errorf("wakes during an operation: %v, want the announce only", got)
	}
	if err := o.end(ctx, StateRunning, nil); err != nil {
		t.Fatal(err)
	}
	e.rt.GrowMemory(sb.ID, 20<<20)
	time.Sleep(100 * time.Millisecond)
	if got := l.get(sb.ID); len(got) != 2 {
		t.Errorf("wakes after the operation: %v, want one more", got)
	}
}
