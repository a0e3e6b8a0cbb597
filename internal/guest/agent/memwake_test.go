package agent_test

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/forkbox/forkbox/internal/guest/agent"
)

// TestMemoryWake: each POST /forkbox/memory-wake wakes the guard
// (Config.Started) and sets the step it reports; 0 turns the host's wakes
// off, a body without a step is refused.
func TestMemoryWake(t *testing.T) {
	var woken atomic.Int32
	ta := startAgent(t, agent.Config{Started: func() { woken.Add(1) }})
	if got := ta.agent.MemoryWakeStep(); got != 0 {
		t.Fatalf("step before any wake: %d", got)
	}
	post := func(body string) int {
		t.Helper()
		resp, err := ta.http.Post(ta.url+"/forkbox/memory-wake", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, tt := range []struct {
		body       string
		status     int
		step       uint64
		wokenAfter int32
	}{
		{`{"step": 16777216}`, http.StatusNoContent, 16 << 20, 1},
		{`{"step": 33554432}`, http.StatusNoContent, 32 << 20, 2},
		{`{}`, http.StatusBadRequest, 32 << 20, 2},
		{`nonsense`, http.StatusBadRequest, 32 << 20, 2},
		{`{"step": 0}`, http.StatusNoContent, 0, 3},
	} {
		if got := post(tt.body); got != tt.status {
			t.Errorf("%s: status %d, want %d", tt.body, got, tt.status)
		}
		if got := ta.agent.MemoryWakeStep(); got != tt.step {
			t.Errorf("%s: step %d, want %d", tt.body, got, tt.step)
		}
		if got := woken.Load(); got != tt.wokenAfter {
			t.Errorf("%s: woken %d times, want %d", tt.body, got, tt.wokenAfter)
		}
	}
	// /init starts a new incarnation: its watch has to announce itself,
	// and the guard, which waited for the old watch's wakes, looks at once
	// to set its own pace. An /init while no watch announced wakes nothing.
	post(`{"step": 16777216}`)
	before := woken.Load()
	for i, want := range []int32{before + 1, before + 1} {
		resp, err := ta.http.Post(ta.url+"/init", "application/json", strings.NewReader(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got := ta.agent.MemoryWakeStep(); resp.StatusCode != http.StatusNoContent || got != 0 {
			t.Errorf("after /init %d (%s): step %d, want 0", i, resp.Status, got)
		}
		if got := woken.Load(); got != want {
			t.Errorf("after /init %d: woken %d times, want %d", i, got, want)
		}
	}
}

// A sandbox whose guard would never wait for wakes answers the announce
// 410, so the daemon stops watching, and keeps no step.
func TestMemoryWakeNotUseful(t *testing.T) {
	var woken atomic.Int32
	ta := startAgent(t, agent.Config{Started: func() { woken.Add(1) }, MemoryWakesUseful: func(uint64) bool { return false }})
	resp, err := ta.http.Post(ta.url+"/forkbox/memory-wake", "application/json", strings.NewReader(`{"step": 16777216}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusGone || ta.agent.MemoryWakeStep() != 0 || woken.Load() != 0 {
		t.Errorf("announce to a small sandbox: %s, step %d, woken %d; want 410, 0, 0", resp.Status, ta.agent.MemoryWakeStep(), woken.Load())
	}
}
