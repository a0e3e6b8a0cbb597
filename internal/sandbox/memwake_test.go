package sandbox

import (
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
