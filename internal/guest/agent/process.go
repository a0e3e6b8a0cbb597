package agent

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/creack/pty"

	pb "github.com/forkbox/forkbox/api/gen/process"
)

const (
	// readChunk is the largest output chunk sent in one data event.
	readChunk = 32 << 10
	// drainGrace is how long output may keep arriving after the process
	// exits. Background children that inherited stdout keep the pipe open
	// forever; without a bound the end event would never be sent.
	drainGrace = 250 * time.Millisecond
)

// errProcessGone is returned when acting on a process that already ended.
var errProcessGone = errors.New("process has already exited")

// managedProc is one process started through the Process service.
type managedProc struct {
	pid    uint32
	tag    *string
	config *pb.ProcessConfig
	events *broadcaster

	inMu  sync.Mutex
	stdin *os.File // guarded by inMu; nil when disabled or closed
	tty   *os.File // PTY master, nil without a PTY; set before start returns

	mu     sync.Mutex
	exited bool // guarded by mu; set before the pid may be reused

	// onStart runs once the pid is known, before the process can be
	// reported as ended (adds the process to the table).
	onStart func()
	// onEnd runs after the end event is published (removes the process
	// from the table).
	onEnd func(*pb.ProcessEvent_EndEvent)
}

// spawn describes a process ready to be started.
type spawn struct {
	cmd     *exec.Cmd
	ptySize *pty.Winsize // nil: plain pipes
	stdin   bool
}

// outputs are the parent's ends of a started process's output.
type outputs struct {
	stdout, stderr *os.File // nil with a PTY
}

// start launches sp through the reaper and begins streaming its output.
// timeout > 0 kills the process after that long, as envd does for the
// client's Connect-Timeout-Ms.
func (p *managedProc) start(r *reaper, sp spawn, timeout time.Duration) error {
	var out outputs
	var childEnds []*os.File
	pid, status, err := r.start(func() (int, error) {
		var err error
		if sp.ptySize != nil {
			p.tty, err = pty.StartWithAttrs(sp.cmd, sp.ptySize, sp.cmd.SysProcAttr)
		} else {
			childEnds, err = p.startPiped(sp, &out)
		}
		if err != nil {
			return 0, err
		}
		return sp.cmd.Process.Pid, nil
	})
	for _, f := range childEnds {
		f.Close() // the child holds its own copies
	}
	if err != nil {
		out.close()
		return err
	}
	// The reaper waits for the child, so the pidfd os.Process keeps is
	// not needed; releasing it avoids leaking one descriptor per process.
	_ = sp.cmd.Process.Release()
	limitChild(pid)
	p.pid = uint32(pid)
	if p.onStart != nil {
		p.onStart()
	}
	go p.run(status, p.readAll(out), timeout)
	return nil
}

// startPiped starts sp.cmd with fresh pipes and returns the child's ends,
// which the caller closes once the child has started (or failed to).
func (p *managedProc) startPiped(sp spawn, out *outputs) ([]*os.File, error) {
	n := 2
	if sp.stdin {
		n = 3
	}
	var childEnds []*os.File
	var parentEnds [3]*os.File
	for i := range n {
		r, w, err := os.Pipe()
		if err != nil {
			for _, f := range parentEnds[:i] {
				f.Close()
			}
			return childEnds, err
		}
		if i == 2 { // stdin: the child reads, the agent writes
			r, w = w, r
		}
		parentEnds[i] = r
		childEnds = append(childEnds, w)
	}
	out.stdout, out.stderr, p.stdin = parentEnds[0], parentEnds[1], parentEnds[2]
	sp.cmd.Stdout, sp.cmd.Stderr = childEnds[0], childEnds[1]
	if sp.stdin {
		sp.cmd.Stdin = childEnds[2]
	}
	err := sp.cmd.Start()
	if err != nil && p.stdin != nil {
		p.stdin.Close()
		p.stdin = nil
	}
	return childEnds, err
}

func (o outputs) close() {
	for _, f := range []*os.File{o.stdout, o.stderr} {
		if f != nil {
			f.Close()
		}
	}
}

// readAll starts one reader per output and returns a channel closed when
// all of them have finished, plus the files to close to stop them early.
func (p *managedProc) readAll(out outputs) readers {
	rd := readers{done: make(chan struct{})}
	var wg sync.WaitGroup
	add := func(f *os.File, wrap func([]byte) *pb.ProcessEvent_DataEvent) {
		rd.files = append(rd.files, f)
		wg.Go(func() { p.pump(f, wrap) })
	}
	if p.tty != nil {
		add(p.tty, func(b []byte) *pb.ProcessEvent_DataEvent {
			return &pb.ProcessEvent_DataEvent{Output: &pb.ProcessEvent_DataEvent_Pty{Pty: b}}
		})
	} else {
		add(out.stdout, func(b []byte) *pb.ProcessEvent_DataEvent {
			return &pb.ProcessEvent_DataEvent{Output: &pb.ProcessEvent_DataEvent_Stdout{Stdout: b}}
		})
		add(out.stderr, func(b []byte) *pb.ProcessEvent_DataEvent {
			return &pb.ProcessEvent_DataEvent{Output: &pb.ProcessEvent_DataEvent_Stderr{Stderr: b}}
		})
	}
	go func() { wg.Wait(); close(rd.done) }()
	return rd
}

// readers tracks a process's output readers.
type readers struct {
	done  chan struct{}
	files []*os.File
}

// pump publishes everything read from f until EOF or error (a PTY master
// reports EIO once the terminal's last user is gone).
func (p *managedProc) pump(f *os.File, wrap func([]byte) *pb.ProcessEvent_DataEvent) {
	for {
		buf := make([]byte, readChunk)
		n, err := f.Read(buf)
		if n > 0 {
			p.events.publish(&pb.ProcessEvent{Event: &pb.ProcessEvent_Data{Data: wrap(buf[:n])}})
		}
		if err != nil {
			return
		}
	}
}

// run waits for the process to end (killing it at the timeout), lets its
// output drain and then sends the end event.
func (p *managedProc) run(status <-chan syscall.WaitStatus, rd readers, timeout time.Duration) {
	var ws syscall.WaitStatus
	if timeout > 0 {
		timer := time.NewTimer(timeout)
		select {
		case ws = <-status:
		case <-timer.C:
			_ = p.signal(syscall.SIGKILL)
			ws = <-status
		}
		timer.Stop()
	} else {
		ws = <-status
	}
	p.mu.Lock()
	p.exited = true
	p.mu.Unlock()
	select {
	case <-rd.done:
	case <-time.After(drainGrace):
		for _, f := range rd.files {
			f.Close()
		}
		<-rd.done
	}
	for _, f := range rd.files {
		f.Close()
	}
	_ = p.CloseStdin()
	end := endEvent(ws)
	p.events.finish(&pb.ProcessEvent{Event: &pb.ProcessEvent_End{End: end}})
	if p.onEnd != nil {
		p.onEnd(end)
	}
}

// endEvent describes a wait status the way envd does (Go's ProcessState
// wording: "exit status 1", "signal: killed").
func endEvent(ws syscall.WaitStatus) *pb.ProcessEvent_EndEvent {
	ev := &pb.ProcessEvent_EndEvent{Exited: ws.Exited(), ExitCode: -1}
	switch {
	case ws.Exited():
		ev.ExitCode = int32(ws.ExitStatus())
		ev.Status = fmt.Sprintf("exit status %d", ws.ExitStatus())
	case ws.Signaled():
		ev.Status = "signal: " + ws.Signal().String()
	default:
		ev.Status = fmt.Sprintf("wait status %d", int(ws))
	}
	if !ws.Exited() || ws.ExitStatus() != 0 {
		ev.Error = &ev.Status
	}
	return ev
}

// signal delivers sig to the process's whole process group: shells started
// by the SDK fork the real work, and killing only the shell would leave it
// running with the output pipe open.
func (p *managedProc) signal(sig syscall.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.exited {
		return errProcessGone
	}
	if err := syscall.Kill(-int(p.pid), sig); err != nil {
		return syscall.Kill(int(p.pid), sig)
	}
	return nil
}
