package codeinterp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/go-zeromq/zmq4"
)

// kernelStartTimeout bounds how long a kernel may take to answer its first
// kernel_info_request.
const kernelStartTimeout = 60 * time.Second

// connInfo is a Jupyter connection file. The Go side chooses the ports and
// the key; the kernel binds them on loopback, so kernel and server stay in
// one sandbox and a checkpoint captures both ends of every connection.
type connInfo struct {
	Transport       string `json:"transport"`
	IP              string `json:"ip"`
	ShellPort       int    `json:"shell_port"`
	IOPubPort       int    `json:"iopub_port"`
	StdinPort       int    `json:"stdin_port"`
	ControlPort     int    `json:"control_port"`
	HBPort          int    `json:"hb_port"`
	Key             string `json:"key"`
	SignatureScheme string `json:"signature_scheme"`
	KernelName      string `json:"kernel_name"`
}

func (c connInfo) endpoint(port int) string {
	return kernelTransport + "://" + net.JoinHostPort(c.IP, strconv.Itoa(port))
}

// freePorts reserves n distinct loopback ports by binding and releasing
// them; the kernel binds them a moment later.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// newConnInfo returns a fresh connection description for kernel name.
func newConnInfo(name string) (connInfo, error) {
	ports, err := freePorts(5)
	if err != nil {
		return connInfo{}, fmt.Errorf("reserve kernel ports: %w", err)
	}
	key := make([]byte, 32)
	rand.Read(key)
	return connInfo{
		Transport: "tcp", IP: "127.0.0.1", ShellPort: ports[0], IOPubPort: ports[1],
		StdinPort: ports[2], ControlPort: ports[3], HBPort: ports[4],
		Key: hex.EncodeToString(key), SignatureScheme: "hmac-sha256", KernelName: name,
	}, nil
}

// jInbound is a message from the kernel and the channel it came on.
type jInbound struct {
	shell bool
	msg   *jMessage
}

// jupyterKernel is one Jupyter kernel process and forkbox's client
// connections to it (shell and control DEALERs, an iopub SUB).
type jupyterKernel struct {
	log     *slog.Logger
	spec    *kernelSpec
	p       *proc
	dir     string
	conn    connInfo
	signer  jSigner
	session string
	shell   zmq4.Socket
	control zmq4.Socket
	iopub   zmq4.Socket
	in      chan jInbound
	stop    context.CancelFunc
	grace   time.Duration
	stderr  tail
	// pendingRestore is code that restores the environment of the last
	// cell, prepended to the next one (kernels with countsSilent).
	pendingRestore string
	// restarting is set when the context is restarted under a running
	// cell, which then reports ContextRestarting as E2B does.
	restarting atomic.Bool
	// outOfMemory is set when the out-of-memory guard acted on a process
	// of the kernel during the current cell (NoteOutOfMemory).
	outOfMemory atomic.Bool
}

// startJupyter launches spec's kernel in cwd and waits until it answers.
func (s *Server) startJupyter(ctx context.Context, spec *kernelSpec, cwd string) (kernel, error) {
	acct, err := s.account()
	if err != nil {
		return nil, err
	}
	conn, err := newConnInfo(spec.name)
	if err != nil {
		return nil, err
	}
	dir, err := writeKernelDir(conn, acct, spec.helpers)
	if err != nil {
		return nil, err
	}
	argv, err := spec.argv(s, filepath.Join(dir, "connection.json"))
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	env := spec.env
	if spec.argvEnv != nil {
		env = append(append([]string(nil), env...), spec.argvEnv(s)...)
	}
	p, stdout, stderr, err := startProc(exec.Command(argv[0], argv[1:]...), acct, cwd, env...)
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start %s kernel: %w", spec.name, err)
	}
	if s.cfg.Started != nil {
		s.cfg.Started()
	}
	sctx, stop := context.WithCancel(context.Background())
	k := &jupyterKernel{
		log: s.log, spec: spec, p: p, dir: dir, conn: conn, signer: jSigner{[]byte(conn.Key)},
		session: newID(), in: make(chan jInbound, 256), stop: stop, grace: s.cfg.InterruptGrace,
	}
	go logStderr(s.log, stdout, &k.stderr)
	go logStderr(s.log, stderr, &k.stderr)
	if err := k.connect(ctx, sctx); err != nil {
		k.close()
		return nil, err
	}
	// What a kernel printed while starting (ipykernel's "NOTE: When using
	// the `ipython kernel` entry point…") says nothing about a later death.
	k.stderr.reset()
	return k, nil
}

// writeKernelDir writes the connection file and the kernel's helpers into
// a private directory the kernel's account can read.
func writeKernelDir(conn connInfo, acct *account, helpers map[string][]byte) (string, error) {
	dir, err := os.MkdirTemp("", "forkbox-kernel-*")
	if err != nil {
		return "", err
	}
	for name, src := range helpers {
		if err = os.WriteFile(filepath.Join(dir, name), src, 0o644); err != nil {
			os.RemoveAll(dir)
			return "", fmt.Errorf("write kernel helper: %w", err)
		}
	}
	b, _ := json.Marshal(conn)
	path := filepath.Join(dir, "connection.json")
	err = os.WriteFile(path, b, 0o600)
	if err == nil && acct.cred != nil {
		uid, gid := int(acct.cred.Uid), int(acct.cred.Gid)
		if err = os.Chown(dir, uid, gid); err == nil {
			err = os.Chown(path, uid, gid)
		}
	}
	if err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("write kernel connection file: %w", err)
	}
	return dir, nil
}

// connect waits for the kernel to bind its ports, dials them and waits for
// the first kernel_info_reply together with an iopub message, which proves
// the iopub subscription is live (ZeroMQ drops PUB messages sent before a
// subscriber has joined).
func (k *jupyterKernel) connect(ctx, sctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, kernelStartTimeout)
	defer cancel()
	if err := k.waitListening(ctx, k.conn.ShellPort); err != nil {
		return err
	}
	opts := []zmq4.Option{zmq4.WithDialerRetry(50 * time.Millisecond), zmq4.WithDialerMaxRetries(100),
		zmq4.WithLogger(slog.NewLogLogger(k.log.Handler(), slog.LevelDebug))}
	k.shell = zmq4.NewDealer(sctx, opts...)
	k.control = zmq4.NewDealer(sctx, opts...)
	k.iopub = zmq4.NewSub(sctx, opts...)
	for _, d := range []struct {
		s    zmq4.Socket
		port int
	}{{k.shell, k.conn.ShellPort}, {k.control, k.conn.ControlPort}, {k.iopub, k.conn.IOPubPort}} {
		if err := d.s.Dial(k.conn.endpoint(d.port)); err != nil {
			return fmt.Errorf("connect to %s kernel: %w", k.spec.name, err)
		}
	}
	if err := k.iopub.SetOption(zmq4.OptionSubscribe, ""); err != nil {
		return err
	}
	go k.read(k.iopub, false)
	go k.read(k.shell, true)
	return k.handshake(ctx)
}

// waitListening polls until the kernel accepts connections on port.
func (k *jupyterKernel) waitListening(ctx context.Context, port int) error {
	addr := net.JoinHostPort(k.conn.IP, strconv.Itoa(port))
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		select {
		case <-k.p.exited:
			return fmt.Errorf("%s kernel exited while starting: %s", k.spec.name, k.stderr.String())
		case <-ctx.Done():
			return fmt.Errorf("%s kernel did not start: %w", k.spec.name, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (k *jupyterKernel) handshake(ctx context.Context) error {
	gotReply, gotIOPub := false, false
	for !gotReply || !gotIOPub {
		if _, err := k.send(k.shell, "kernel_info_request", struct{}{}); err != nil {
			return err
		}
		retry := time.After(250 * time.Millisecond)
	wait:
		for !gotReply || !gotIOPub {
			select {
			case m, ok := <-k.in:
				if !ok {
					return errors.New("kernel connection closed while starting")
				}
				if m.shell && m.msg.Header.MsgType == "kernel_info_reply" {
					gotReply = true
				} else if !m.shell {
					gotIOPub = true
				}
			case <-retry:
				break wait
			case <-k.p.exited:
				return fmt.Errorf("%s kernel exited while starting: %s", k.spec.name, k.stderr.String())
			case <-ctx.Done():
				return fmt.Errorf("%s kernel did not answer: %w", k.spec.name, ctx.Err())
			}
		}
	}
	return nil
}

// read forwards decoded messages from s until the socket is closed.
func (k *jupyterKernel) read(s zmq4.Socket, shell bool) {
	for {
		raw, err := s.Recv()
		if err != nil {
			if shell {
				close(k.in)
			}
			return
		}
		m, err := k.signer.decode(raw.Frames)
		if err != nil {
			k.log.Warn("code interpreter: dropping kernel message", "err", err)
			continue
		}
		select {
		case k.in <- jInbound{shell: shell, msg: m}:
		case <-k.p.exited:
			return
		}
	}
}

// send signs and sends a request on s, returning its msg_id.
func (k *jupyterKernel) send(s zmq4.Socket, msgType string, content any) (string, error) {
	id, frames, err := k.signer.encode(k.session, msgType, content)
	if err != nil {
		return "", err
	}
	if err := s.SendMulti(zmq4.NewMsgFrom(frames...)); err != nil {
		return "", fmt.Errorf("send %s: %w", msgType, err)
	}
	return id, nil
}

func (k *jupyterKernel) alive() bool { return k.p.alive() }

func (k *jupyterKernel) markRestart() { k.restarting.Store(true) }

// close kills the kernel's process group and drops the connections.
func (k *jupyterKernel) close() {
	k.p.kill()
	k.stop()
	for _, s := range []zmq4.Socket{k.shell, k.control, k.iopub} {
		if s != nil {
			s.Close()
		}
	}
	os.RemoveAll(k.dir)
}

// died describes a kernel that exited during a cell.
func (k *jupyterKernel) died() error {
	k.close()
	if k.restarting.Load() {
		return &execError{"ContextRestarting", "Context was restarted"}
	}
	msg := k.deathCause() + "; the context's state is lost and the next execution starts a fresh kernel"
	if t := k.stderr.String(); t != "" {
		msg += ": " + t
	}
	return &execError{"DeadKernelError", msg}
}
