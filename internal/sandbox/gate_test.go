package sandbox

import (
	"context"
	"errors"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// agentStub is the agents behind a gated transport: it records the order
// requests reach it in and the hint each carried, and holds a request's
// answer while its path has an open channel in stall.
type agentStub struct {
	mu    sync.Mutex
	order []string
	hints map[string]string
	stall map[string]chan struct{}
}

func newAgentStub() *agentStub {
	return &agentStub{hints: map[string]string{}, stall: map[string]chan struct{}{}}
}

func (s *agentStub) RoundTrip(req *http.Request) (*http.Response, error) {
	s.mu.Lock()
	s.order = append(s.order, req.URL.Path)
	s.hints[req.URL.Path] = req.Header.Get(HostBusyHeader)
	ch := s.stall[req.URL.Path]
	s.mu.Unlock()
	if ch != nil {
		select {
		case <-ch:
		case <-req.Context().Done():
			return nil, req.Context().Err()
		}
	}
	return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody, Request: req}, nil
}

func (s *agentStub) seen() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.order...)
}

// send makes a request for path on port through rt, in the background;
// the returned channel gets its error.
func send(ctx context.Context, rt http.RoundTripper, port int, path string, hint string) <-chan error {
	errc := make(chan error, 1)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://sbx.0:"+strconv.Itoa(port)+path, http.NoBody)
	if hint != "" {
		req.Header.Set(HostBusyHeader, hint)
	}
	go func() {
		resp, err := rt.RoundTrip(req)
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	return errc
}

// holdingSlot starts /a on a one-slot gate, stalled at the agent until
// release is closed, and returns once /a holds the slot. Call it in a
// synctest bubble.
func holdingSlot(t *testing.T) (*agentStub, *gatedTransport, chan struct{}, <-chan error) {
	stub := newAgentStub()
	rt := gated(stub, 1)
	release := make(chan struct{})
	stub.stall["/a"] = release
	a := send(t.Context(), rt, DefaultAgentPort, "/a", "")
	synctest.Wait()
	return stub, rt, release, a
}

func gated(stub *agentStub, slots int) *gatedTransport {
	return &gatedTransport{rt: stub, gate: newAgentGate(slots), port: strconv.Itoa(DefaultAgentPort)}
}

// TestAgentGateOrder: with one slot, requests reach agents one at a time in
// the order they came; those let in while others waited carry the busy
// hint, larger the more wait behind them; the last and a lone one carry
// none, and a client's own hint never passes.
func TestAgentGateOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		stub := newAgentStub()
		rt := gated(stub, 1)
		release := make(chan struct{})
		stub.stall["/a"] = release
		var errs []<-chan error
		for _, p := range []string{"/a", "/b", "/c", "/d"} {
			errs = append(errs, send(t.Context(), rt, DefaultAgentPort, p, "999"))
			synctest.Wait()
		}
		if got := stub.seen(); len(got) != 1 {
			t.Fatalf("reached the agents while /a held the only slot: %v", got)
		}
		time.Sleep(20 * time.Millisecond) // /a holds its slot 20 ms
		close(release)
		for _, e := range errs {
			if err := <-e; err != nil {
				t.Fatal(err)
			}
		}
		if got := stub.seen(); !slices.Equal(got, []string{"/a", "/b", "/c", "/d"}) {
			t.Errorf("order %v, want /a /b /c /d", got)
		}
		b, _ := strconv.Atoi(stub.hints["/b"])
		c, _ := strconv.Atoi(stub.hints["/c"])
		if stub.hints["/a"] != "" || stub.hints["/d"] != "" || b <= c || c <= 0 {
			t.Errorf("hints %v: want none on /a and /d, /b's above /c's above 0", stub.hints)
		}
	})
}

// TestAgentGateHold: a request that gets no answer lets the next one in
// after agentGateHold.
func TestAgentGateHold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		stub := newAgentStub()
		rt := gated(stub, 1)
		stub.stall["/slow"] = make(chan struct{})
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		slow := send(ctx, rt, DefaultAgentPort, "/slow", "")
		synctest.Wait()
		start := time.Now()
		if err := <-send(t.Context(), rt, DefaultAgentPort, "/next", ""); err != nil {
			t.Fatal(err)
		}
		if waited := time.Since(start); waited != agentGateHold {
			t.Errorf("/next waited %v, want %v", waited, agentGateHold)
		}
		cancel()
		<-slow
	})
}

// TestAgentGateCounts: the metrics' counts see a request waiting, then
// both let in and the time the second waited; no gate counts nothing.
func TestAgentGateCounts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, rt, release, a := holdingSlot(t)
		next := send(t.Context(), rt, DefaultAgentPort, "/next", "")
		synctest.Wait()
		if c := rt.gate.counts(); c.Waiting != 1 || c.Admitted != 1 || c.Slots != 1 {
			t.Errorf("with /next waiting: %+v", c)
		}
		if err := <-next; err != nil {
			t.Fatal(err)
		}
		want := GateCounts{Slots: 1, Admitted: 2, Waited: agentGateHold}
		if c := rt.gate.counts(); c != want {
			t.Errorf("after /next: %+v, want %+v", c, want)
		}
		close(release)
		if err := <-a; err != nil {
			t.Fatal(err)
		}
	})
	var none *agentGate
	if c := none.counts(); c != (GateCounts{}) {
		t.Errorf("no gate: %+v", c)
	}
}

// TestAgentGateCancel: a request whose client leaves while it waits fails
// with the context's error and takes no slot with it.
func TestAgentGateCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		stub, rt, release, a := holdingSlot(t)
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
		defer cancel()
		if err := <-send(ctx, rt, DefaultAgentPort, "/gone", ""); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("waiting request whose client left: %v, want the deadline", err)
		}
		close(release)
		if err := <-a; err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if err := <-send(t.Context(), rt, DefaultAgentPort, "/c", ""); err != nil || time.Since(start) != 0 {
			t.Errorf("/c after the others: %v after %v, want at once", err, time.Since(start))
		}
		if got := stub.seen(); !slices.Equal(got, []string{"/a", "/c"}) || rt.gate.waiting.Load() != 0 {
			t.Errorf("reached %v with %d waiting, want /a /c and none", got, rt.gate.waiting.Load())
		}
	})
}

// TestAgentGateOtherPorts: requests to a sandbox's other ports (the user's
// servers) do not wait for the agents' slots.
func TestAgentGateOtherPorts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		stub, rt, release, a := holdingSlot(t)
		if err := <-send(t.Context(), rt, 8080, "/app", "7"); err != nil {
			t.Fatal(err)
		}
		if stub.hints["/app"] != "7" {
			t.Errorf("a user port's request lost its header: %q", stub.hints["/app"])
		}
		close(release)
		if err := <-a; err != nil {
			t.Fatal(err)
		}
	})
}

// TestAgentGateOffDropsHint: with the gate off, requests go straight
// through, but a client's own busy hint still never reaches an agent (it
// would put the agent's refill off by up to 10 s); other ports keep it.
func TestAgentGateOffDropsHint(t *testing.T) {
	stub := newAgentStub()
	rt := &gatedTransport{rt: stub, port: strconv.Itoa(DefaultAgentPort)}
	if err := <-send(t.Context(), rt, DefaultAgentPort, "/cmd", "9000"); err != nil {
		t.Fatal(err)
	}
	if err := <-send(t.Context(), rt, 8080, "/app", "7"); err != nil {
		t.Fatal(err)
	}
	if h := stub.hints["/cmd"]; h != "" {
		t.Errorf("a client's hint reached the agent with the gate off: %q", h)
	}
	if h := stub.hints["/app"]; h != "7" {
		t.Errorf("a user port's request lost its header: %q", h)
	}
}

// TestAgentReadsHostBusyHeader: the agent (the wire's other side, which
// does not import this package) reads the header by this name.
func TestAgentReadsHostBusyHeader(t *testing.T) {
	src, err := os.ReadFile("../guest/agent/process_service.go")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(src), `"`+HostBusyHeader+`"`) {
		t.Errorf("the agent does not read %s", HostBusyHeader)
	}
}
