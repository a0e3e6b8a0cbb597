package agent

import (
	"errors"

	"github.com/creack/pty"

	pb "github.com/forkbox/forkbox/api/gen/process"
)

var (
	errNoStdin = errors.New("stdin is not enabled for this process or was closed")
	errNoPTY   = errors.New("process has no PTY")
	errHasPTY  = errors.New("process runs on a PTY: send input as pty, and Ctrl+D instead of closing stdin")
)

// writeInput sends one input chunk to the process's stdin or its PTY.
func (p *managedProc) writeInput(in *pb.ProcessInput) error {
	switch v := in.GetInput().(type) {
	case *pb.ProcessInput_Pty:
		if p.tty == nil {
			return errNoPTY
		}
		_, err := p.tty.Write(v.Pty)
		return err
	case *pb.ProcessInput_Stdin:
		if p.tty != nil {
			// Clients that do not know the process has a PTY still
			// expect their bytes to arrive, so forward them.
			_, err := p.tty.Write(v.Stdin)
			return err
		}
		return p.writeStdin(v.Stdin)
	default:
		return nil
	}
}

// writeStdin writes to the stdin pipe; inMu keeps chunks from concurrent
// callers whole and ordered.
func (p *managedProc) writeStdin(b []byte) error {
	p.inMu.Lock()
	defer p.inMu.Unlock()
	if p.stdin == nil {
		return errNoStdin
	}
	_, err := p.stdin.Write(b)
	return err
}

// CloseStdin closes the stdin pipe so the process reads EOF. Closing twice
// is not an error.
func (p *managedProc) CloseStdin() error {
	p.inMu.Lock()
	defer p.inMu.Unlock()
	if p.stdin == nil {
		return nil
	}
	err := p.stdin.Close()
	p.stdin = nil
	return err
}

// resize changes the PTY's window size.
func (p *managedProc) resize(size *pb.PTY_Size) error {
	if p.tty == nil {
		return errNoPTY
	}
	return pty.Setsize(p.tty, &pty.Winsize{Cols: uint16(size.GetCols()), Rows: uint16(size.GetRows())})
}

// info describes the process for List.
func (p *managedProc) info() *pb.ProcessInfo {
	return &pb.ProcessInfo{Config: p.config, Pid: p.pid, Tag: p.tag}
}
