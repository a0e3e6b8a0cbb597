package codeinterp

import (
	"bufio"
	"context"
	"net"

	"github.com/go-zeromq/zmq4"
	"github.com/go-zeromq/zmq4/transport"
)

// kernelTransport is the zmq4 transport the server dials kernels with:
// zmq4's tcp with reads buffered. zmq4 reads each frame's header and body
// with a read of its own, a dozen system calls for one Jupyter message,
// and gVisor makes every one of them dear; buffered, a message usually
// takes one.
const kernelTransport = "forkbox-tcp"

func init() {
	if err := zmq4.RegisterTransport(kernelTransport, bufferedTCP{transport.New("tcp")}); err != nil {
		panic(err)
	}
}

// bufferedTCP is a transport whose connections buffer what they read.
type bufferedTCP struct{ transport.Transport }

// Dial connects as tcp does and wraps the connection's reads in a buffer.
func (t bufferedTCP) Dial(ctx context.Context, d transport.Dialer, addr string) (net.Conn, error) {
	c, err := t.Transport.Dial(ctx, d, addr)
	if err != nil {
		return nil, err
	}
	return &bufferedConn{Conn: c, r: bufio.NewReaderSize(c, 64<<10)}, nil
}

// bufferedConn is a net.Conn that reads through a buffer.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }
