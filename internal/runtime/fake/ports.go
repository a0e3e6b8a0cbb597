package fake

import (
	"net/http"

	"github.com/forkbox/forkbox/internal/runtime"
)

// portServer serves one port of a sandbox when Runtime.PortHandler is set.
type portServer struct {
	ln  *pipeListener
	srv *http.Server
}

// portListenerLocked returns the listener of port inside sb, starting its
// server on first use; nil when nothing listens there. The caller holds mu.
func (r *Runtime) portListenerLocked(sb *sandbox, port int) *pipeListener {
	if ps, ok := sb.ports[port]; ok {
		return ps.ln
	}
	h := r.PortHandler(sb.spec.ID, port)
	if h == nil {
		return nil
	}
	ps := &portServer{ln: newPipeListener(), srv: &http.Server{Handler: h}}
	ps.ln.setFrozen(sb.state == runtime.StatePaused)
	if sb.ports == nil {
		sb.ports = map[int]*portServer{}
	}
	sb.ports[port] = ps
	go ps.srv.Serve(ps.ln)
	return ps.ln
}

// stopPorts ends every port's server and the connections it accepted.
func (sb *sandbox) stopPorts() {
	for _, ps := range sb.ports {
		ps.srv.Close()
		ps.ln.Close()
	}
	sb.ports = nil
}

// freezePorts freezes or thaws every port's listener.
func (sb *sandbox) freezePorts(frozen bool) {
	for _, ps := range sb.ports {
		ps.ln.setFrozen(frozen)
	}
}
