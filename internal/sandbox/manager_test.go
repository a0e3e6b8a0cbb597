package sandbox

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/runtime"
)

func TestTransitionTable(t *testing.T) {
	for _, tc := range []struct {
		from, to State
		ok       bool
	}{
		{StateCreating, StateRunning, true},
		{StateRunning, StatePausing, true},
		{StatePausing, StatePaused, true},
		{StatePaused, StateResuming, true},
		{StateResuming, StateRunning, true},
		{StateRunning, StateSnapshotting, true},
		{StateSnapshotting, StateRunning, true},
		{StateRunning, StateKilling, true},
		{StateKilling, StateKilled, true},
		{StatePaused, StateRunning, false}, // must go through resuming
		{StateKilled, StateRunning, false},
		{StateKilling, StateRunning, false},
		{StateCreating, StatePaused, false},
	} {
		if got := CanTransition(tc.from, tc.to); got != tc.ok {
			t.Errorf("CanTransition(%s, %s) = %v, want %v", tc.from, tc.to, got, tc.ok)
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("mustTransition(killed, running) did not panic")
		}
	}()
	mustTransition(StateKilled, StateRunning)
}

func TestPublicState(t *testing.T) {
	for s, want := range map[State]PublicState{
		StateRunning: "running", StateSnapshotting: "running", StatePausing: "paused",
		StatePaused: "paused", StateResuming: "paused", StateKilled: "killed",
	} {
		if got := s.Public(); got != want {
			t.Errorf("%s.Public() = %q, want %q", s, got, want)
		}
	}
}

func TestCreateGetKill(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	sb := e.create(t, CreateRequest{Metadata: map[string]string{"k": "v"}, EnvVars: map[string]string{"A": "1"}})
	if sb.State != StateRunning || len(sb.ID) != runtime.IDLength || sb.Metadata["k"] != "v" {
		t.Fatalf("created %+v", sb)
	}
	if e.inits.Load() != 1 {
		t.Errorf("agent /init calls = %d, want 1", e.inits.Load())
	}
	if got := sb.EndAt.Sub(sb.StartedAt); got != DefaultTimeout {
		t.Errorf("default TTL = %s", got)
	}
	if err := e.m.Kill(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.Get(ctx, sb.ID); !errdefs.IsNotFound(err) {
		t.Errorf("get after kill: %v, want not found", err)
	}
	if err := e.m.Kill(ctx, sb.ID); !errdefs.IsNotFound(err) {
		t.Errorf("second kill: %v, want not found", err)
	}
	if ids := e.runtimeIDs(t); len(ids) != 0 {
		t.Errorf("runtime still has %v", ids)
	}
}

func TestCreateErrors(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		req  CreateRequest
		want error
	}{
		{"no template", CreateRequest{}, errdefs.ErrInvalidArgument},
		{"unknown template", CreateRequest{TemplateID: "nope"}, errdefs.ErrNotFound},
		{"negative timeout", CreateRequest{TemplateID: "base", Timeout: -time.Second}, errdefs.ErrInvalidArgument},
		{"huge timeout", CreateRequest{TemplateID: "base", Timeout: 1000 * time.Hour}, errdefs.ErrInvalidArgument},
	} {
		if _, err := e.m.Create(ctx, tc.req); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
}

func TestCreateFailureLeavesNothing(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(e *env)
	}{
		{"runtime create fails", func(e *env) {
			e.rt.FailCreate = func(runtime.Spec) error { return errdefs.ErrResourceExhausted }
		}},
		{"agent init fails", func(e *env) {
			e.rt.Handler = func(string) http.Handler { return &memAgent{inits: &e.inits, fail: true} }
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			tc.setup(e)
			if _, err := e.m.Create(context.Background(), CreateRequest{TemplateID: "base"}); err == nil {
				t.Fatal("create succeeded")
			}
			if ids := e.runtimeIDs(t); len(ids) != 0 {
				t.Errorf("runtime kept %v", ids)
			}
			list, _, _ := e.m.List(context.Background(), ListFilter{})
			if len(list) != 0 {
				t.Errorf("list shows %d sandboxes", len(list))
			}
		})
	}
}

func TestListFilterAndPaging(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	for i := 0; i < 5; i++ {
		tag := "a"
		if i%2 == 1 {
			tag = "b"
		}
		e.create(t, CreateRequest{Metadata: map[string]string{"tag": tag}})
	}
	var seen []string
	tok := ""
	for page := 0; ; page++ {
		list, next, err := e.m.List(ctx, ListFilter{Metadata: map[string]string{"tag": "a"}, Limit: 2, NextToken: tok})
		if err != nil {
			t.Fatal(err)
		}
		for _, sb := range list {
			seen = append(seen, sb.ID)
		}
		if next == "" {
			break
		}
		tok = next
		if page > 5 {
			t.Fatal("paging does not end")
		}
	}
	if len(seen) != 3 {
		t.Errorf("tag=a listed %d sandboxes, want 3", len(seen))
	}
	if _, _, err := e.m.List(ctx, ListFilter{States: []PublicState{"bogus"}}); !errdefs.IsInvalidArgument(err) {
		t.Errorf("bogus state: %v", err)
	}
}

func TestTimeoutAndRefresh(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		ctx := context.Background()
		sb := e.create(t, CreateRequest{Timeout: 100 * time.Second})
		// Refresh never shortens.
		got, err := e.m.Refresh(ctx, sb.ID, 10*time.Second)
		if err != nil || !got.EndAt.Equal(sb.EndAt) {
			t.Errorf("refresh shortened: %v → %v (%v)", sb.EndAt, got.EndAt, err)
		}
		got, _ = e.m.Refresh(ctx, sb.ID, 200*time.Second)
		if want := time.Now().Add(200 * time.Second); !got.EndAt.Equal(want) {
			t.Errorf("refresh extend: %v, want %v", got.EndAt, want)
		}
		// SetTimeout replaces, shortening too.
		got, _ = e.m.SetTimeout(ctx, sb.ID, 5*time.Second)
		if want := time.Now().Add(5 * time.Second); !got.EndAt.Equal(want) {
			t.Errorf("set timeout: %v, want %v", got.EndAt, want)
		}
		if _, err := e.m.SetTimeout(ctx, sb.ID, -time.Second); !errdefs.IsInvalidArgument(err) {
			t.Errorf("negative timeout: %v", err)
		}
		if _, err := e.m.Refresh(ctx, sb.ID, 2*time.Hour); !errdefs.IsInvalidArgument(err) {
			t.Errorf("refresh over an hour: %v", err)
		}
		e.shutdown(t)
	})
}

func TestEvictorKillsExpired(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { e.m.Run(ctx); close(done) }()
		short := e.create(t, CreateRequest{Timeout: 3 * time.Second})
		long := e.create(t, CreateRequest{Timeout: 60 * time.Second})
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if _, err := e.m.Get(ctx, short.ID); err != nil {
			t.Fatalf("evicted early: %v", err)
		}
		time.Sleep(1500 * time.Millisecond) // deadline + at most one sweep
		synctest.Wait()
		if _, err := e.m.Get(ctx, short.ID); !errdefs.IsNotFound(err) {
			t.Errorf("expired sandbox still there: %v", err)
		}
		if _, err := e.m.Get(ctx, long.ID); err != nil {
			t.Errorf("long-lived sandbox evicted: %v", err)
		}
		cancel()
		<-done
		e.shutdown(t)
	})
}

func TestMetricsFirstReadingIsSane(t *testing.T) {
	e := newEnv(t)
	sb := e.create(t, CreateRequest{MemoryMB: 300})
	for i := 0; i < 2; i++ {
		ms, err := e.m.Metrics(context.Background(), sb.ID)
		if err != nil || len(ms) != 1 {
			t.Fatalf("metrics: %v %v", ms, err)
		}
		if p := ms[0].CPUUsedPct; p < 0 || p > 100 {
			t.Errorf("reading %d: cpuUsedPct = %v", i, p)
		}
		if ms[0].MemTotal != 300<<20 {
			t.Errorf("memTotal = %d, want the sandbox's 300 MiB", ms[0].MemTotal)
		}
	}
}
