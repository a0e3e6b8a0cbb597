package fake

import (
	"net"
	"sync"
)

// pipeListener is an in-memory net.Listener: Dial hands it one end of a
// net.Pipe and the sandbox's http.Server accepts the other. While frozen it
// holds connections back, like a frozen sandbox that accepts nothing.
type pipeListener struct {
	conns  chan net.Conn
	done   chan struct{}
	once   sync.Once
	mu     sync.Mutex
	frozen bool          // guarded by mu
	thawed chan struct{} // closed on Thaw; guarded by mu
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

// dial returns the client end of a new connection.
func (l *pipeListener) dial() (net.Conn, bool) {
	client, server := net.Pipe()
	select {
	case l.conns <- server:
		return client, true
	case <-l.done:
		client.Close()
		server.Close()
		return nil, false
	}
}

// Accept implements net.Listener.
func (l *pipeListener) Accept() (net.Conn, error) {
	for {
		l.mu.Lock()
		frozen, thawed := l.frozen, l.thawed
		l.mu.Unlock()
		if !frozen {
			break
		}
		select {
		case <-thawed:
		case <-l.done:
			return nil, net.ErrClosed
		}
	}
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// setFrozen freezes or thaws the listener.
func (l *pipeListener) setFrozen(frozen bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if frozen && !l.frozen {
		l.thawed = make(chan struct{})
	}
	if !frozen && l.frozen {
		close(l.thawed)
	}
	l.frozen = frozen
}

// Close implements net.Listener.
func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

// Addr implements net.Listener.
func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "fake" }
