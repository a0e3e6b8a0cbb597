package sandbox

import (
	"net"
	"sync"
)

// connSet tracks the open data-plane connections of each sandbox, so they
// can be cut when the sandbox stops. Without this a client streaming from a
// killed or paused sandbox would hang: the sandbox side vanishes without a
// FIN or RST, and the host-side socket waits for a peer that is gone.
type connSet struct {
	mu    sync.Mutex
	bySbx map[string]map[*trackedConn]struct{} // guarded by mu
}

// trackedConn removes itself from its set when closed.
type trackedConn struct {
	net.Conn
	set  *connSet
	id   string
	once sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() { c.set.remove(c) })
	return c.Conn.Close()
}

// track wraps conn to sandbox id.
func (s *connSet) track(id string, conn net.Conn) net.Conn {
	c := &trackedConn{Conn: conn, set: s, id: id}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.bySbx == nil {
		s.bySbx = map[string]map[*trackedConn]struct{}{}
	}
	if s.bySbx[id] == nil {
		s.bySbx[id] = map[*trackedConn]struct{}{}
	}
	s.bySbx[id][c] = struct{}{}
	return c
}

func (s *connSet) remove(c *trackedConn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.bySbx[c.id], c)
	if len(s.bySbx[c.id]) == 0 {
		delete(s.bySbx, c.id)
	}
}

// closeAll cuts every open connection to sandbox id.
func (s *connSet) closeAll(id string) {
	s.mu.Lock()
	conns := s.bySbx[id]
	delete(s.bySbx, id)
	s.mu.Unlock()
	for c := range conns {
		c.once.Do(func() {})
		c.Conn.Close()
	}
}

// NetConn returns the connection c wraps, so copies can splice from it;
// closing must still go through c.
func (c *trackedConn) NetConn() net.Conn { return c.Conn }
