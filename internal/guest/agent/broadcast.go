package agent

import (
	"sync"

	pb "github.com/forkbox/forkbox/api/gen/process"
)

// maxQueuedBytes bounds the output buffered for one slow subscriber. Beyond
// it the subscriber is cut off (its stream ends with an error) rather than
// letting one stalled client grow the agent's memory without limit.
const maxQueuedBytes = 64 << 20

// broadcaster fans a process's events out to every attached stream. The
// producer never blocks on a subscriber: each subscriber has its own queue,
// so a slow client cannot stall the process's output or other clients, and a
// client attaching late receives everything produced after it attached.
type broadcaster struct {
	mu   sync.Mutex
	subs map[*subscriber]struct{} // guarded by mu
	end  *pb.ProcessEvent         // guarded by mu; set once the process ended
}

// subscriber is one stream's queue of pending events.
type subscriber struct {
	b      *broadcaster
	mu     sync.Mutex
	queue  []*pb.ProcessEvent // guarded by mu
	bytes  int                // guarded by mu
	done   bool               // guarded by mu; no more events will come
	over   bool               // guarded by mu; dropped for falling behind
	notify chan struct{}      // capacity 1: "queue changed"
}

func newBroadcaster() *broadcaster {
	return &broadcaster{subs: map[*subscriber]struct{}{}}
}

// subscribe attaches a new subscriber. If the process already ended it gets
// just the end event.
func (b *broadcaster) subscribe() *subscriber {
	s := &subscriber{b: b, notify: make(chan struct{}, 1)}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.end != nil {
		s.push(b.end, true)
		return s
	}
	b.subs[s] = struct{}{}
	return s
}

// publish queues ev for every current subscriber.
func (b *broadcaster) publish(ev *pb.ProcessEvent) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for s := range b.subs {
		s.push(ev, false)
	}
}

// finish queues the end event for everyone and closes all queues.
func (b *broadcaster) finish(ev *pb.ProcessEvent) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.end = ev
	for s := range b.subs {
		s.push(ev, true)
	}
	clear(b.subs)
}

// unsubscribe detaches s; called when its stream goes away.
func (s *subscriber) unsubscribe() {
	s.b.mu.Lock()
	delete(s.b.subs, s)
	s.b.mu.Unlock()
}

// push appends ev; last marks the final event of the stream.
func (s *subscriber) push(ev *pb.ProcessEvent, last bool) {
	s.mu.Lock()
	if !s.done {
		s.queue = append(s.queue, ev)
		s.bytes += eventSize(ev)
		s.done = last
		if s.bytes > maxQueuedBytes {
			s.over, s.done = true, true
		}
	}
	s.mu.Unlock()
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

// take removes and returns everything queued, and whether the stream is
// finished (done) and whether it was cut off for falling behind (over).
func (s *subscriber) take() (evs []*pb.ProcessEvent, done, over bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	evs, s.queue, s.bytes = s.queue, nil, 0
	return evs, s.done, s.over
}

// eventSize approximates the memory an event pins.
func eventSize(ev *pb.ProcessEvent) int {
	d := ev.GetData()
	return 64 + len(d.GetStdout()) + len(d.GetStderr()) + len(d.GetPty())
}
