package sandbox

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// The agent gate: the data plane lets a few requests to agents (commands,
// files, watches) into sandboxes at a time, in the order they came, and the
// rest wait their turn. A burst to many sandboxes at once is CPU-bound
// (every request's work happens in a different sentry, on the same few
// host CPUs); let in all at once, the sentries share the CPUs, thrash, and
// every request ends near the end of the burst. In turn, half of them are
// done by its middle, and each costs the host a third of the CPU: 100
// commands.run("echo hi") across 100 live sandboxes on 2 CPUs took
// 1823 ms p50 / 2083 ms p99 all at once, 422 / 750 ms two at a time
// (docs/benchmarks.md). A request holds its slot until its response
// headers arrive (an agent sends them once the work is under way: a
// command's start event, a small call's answer) or agentGateHold passes,
// so a slow one delays the queue by at most that much.

// HostBusyHeader goes on a request to an agent that was let in while others
// still waited: how many milliseconds the host expects to stay busy with
// them. The agent puts off its own background work (the command pool's
// refill, a login shell's start) until then, so it does not compete with
// the requests behind this one. A client's own value is dropped.
const HostBusyHeader = "Forkbox-Host-Busy-Ms"

// agentGateHold is the longest one request keeps its slot.
const agentGateHold = 50 * time.Millisecond

// maxHostBusy bounds the hint.
const maxHostBusy = 10 * time.Second

// agentGate admits requests n at a time in arrival order. A Go channel
// queues blocked senders first in, first out, so the slots are the
// channel's buffer and the queue is its senders.
type agentGate struct {
	slots   chan struct{}
	waiting atomic.Int64
	// held is a moving average (ns) of how long a request kept its slot:
	// the hint's estimate of how fast the queue drains.
	held atomic.Int64
	// admitted and waited (ns) count every request let in and the time
	// they waited, for the metrics.
	admitted, waited atomic.Int64
}

// GateCounts is the agent gate's state for the metrics.
type GateCounts struct {
	// Slots is the gate's size (0: no gate).
	Slots int
	// Waiting counts requests waiting for a slot now.
	Waiting int64
	// Admitted counts requests let in since the daemon started.
	Admitted int64
	// Waited sums the time they waited.
	Waited time.Duration
}

// counts reads g's counts (the zero GateCounts for no gate).
func (g *agentGate) counts() GateCounts {
	if g == nil {
		return GateCounts{}
	}
	return GateCounts{Slots: cap(g.slots), Waiting: g.waiting.Load(),
		Admitted: g.admitted.Load(), Waited: time.Duration(g.waited.Load())}
}

func newAgentGate(n int) *agentGate {
	return &agentGate{slots: make(chan struct{}, n)}
}

// enter waits for a slot and returns how many requests still wait behind.
func (g *agentGate) enter(ctx context.Context) (int64, error) {
	select {
	case g.slots <- struct{}{}:
		g.admitted.Add(1)
		return 0, nil // no queue: a free slot means nobody waits
	default:
	}
	g.waiting.Add(1)
	defer g.waiting.Add(-1)
	start := time.Now()
	select {
	case g.slots <- struct{}{}:
		g.admitted.Add(1)
		g.waited.Add(int64(time.Since(start)))
		return g.waiting.Load() - 1, nil
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// leave frees a slot held for d.
func (g *agentGate) leave(d time.Duration) {
	old := g.held.Load()
	if old == 0 {
		old = int64(d)
	}
	g.held.Store(old + (int64(d)-old)/8) // racing updates only blur an average
	<-g.slots
}

// busyFor estimates how long the backlog requests behind one keep the host
// busy, on the long side: an agent that puts its work off too long only
// starts a later command fresh, one that starts it too soon slows every
// request behind. Each request holds a slot about the average time, but
// the average of a quiet host is what the first requests of a burst see,
// and a slot's work goes on after it is freed (the command's output and
// end): 100 commands on 2 slots drained at 15 ms per slot against ~5 ms
// quiet. So twice the average, at least minSlotTime.
func (g *agentGate) busyFor(backlog int64) time.Duration {
	if backlog <= 0 {
		return 0
	}
	per := max(time.Duration(g.held.Load()), minSlotTime)
	d := 2*time.Duration(backlog)*per/time.Duration(cap(g.slots)) + agentGateHold
	return min(d, maxHostBusy)
}

// minSlotTime is the least busyFor assumes one request holds a slot.
const minSlotTime = 10 * time.Millisecond

// gatedTransport sends requests to port (the agents') through gate. With
// no gate it only drops a client's own busy hint, which an agent would
// otherwise take as the host's word and put its refill off by.
type gatedTransport struct {
	rt   http.RoundTripper
	gate *agentGate // nil: the gate is off
	port string
}

// RoundTrip implements http.RoundTripper.
func (t *gatedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Port() != t.port {
		return t.rt.RoundTrip(req)
	}
	if t.gate == nil {
		return t.rt.RoundTrip(withBusyHint(req, 0))
	}
	backlog, err := t.gate.enter(req.Context())
	if err != nil {
		if req.Body != nil {
			req.Body.Close() // as a RoundTripper must, even on error
		}
		return nil, err
	}
	start := time.Now()
	leave := sync.OnceFunc(func() { t.gate.leave(time.Since(start)) })
	timer := time.AfterFunc(agentGateHold, leave)
	resp, err := t.rt.RoundTrip(withBusyHint(req, t.gate.busyFor(backlog)))
	timer.Stop()
	leave()
	return resp, err
}

// withBusyHint returns req carrying the hint busy (none when zero), a copy
// when its headers must change: a RoundTripper does not modify its request.
func withBusyHint(req *http.Request, busy time.Duration) *http.Request {
	if busy <= 0 && req.Header.Get(HostBusyHeader) == "" {
		return req
	}
	out := req.Clone(req.Context())
	out.Header.Del(HostBusyHeader)
	if busy > 0 {
		out.Header.Set(HostBusyHeader, strconv.FormatInt(busy.Milliseconds(), 10))
	}
	return out
}
