package codeinterp

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// account is who workers run as.
type account struct {
	name string
	home string
	cred *syscall.Credential // nil: run as the server's own user
}

// account resolves Config.DefaultUser ("user" if that account exists,
// else the server's own account).
func (s *Server) account() (*account, error) {
	name := s.cfg.DefaultUser
	if name == "" {
		if _, err := user.Lookup("user"); err == nil {
			name = "user"
		}
	}
	if name == "" {
		a := &account{home: os.Getenv("HOME")}
		if u, err := user.Current(); err == nil {
			a.name, a.home = u.Username, u.HomeDir
		}
		return a, nil
	}
	u, err := user.Lookup(name)
	if err != nil {
		return nil, fmt.Errorf("default user: %w", err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("default user %s: non-numeric uid/gid", name)
	}
	a := &account{name: u.Username, home: u.HomeDir}
	if os.Geteuid() == 0 && int(uid) != os.Geteuid() {
		cred := &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if gids, err := u.GroupIds(); err == nil {
			for _, g := range gids {
				if n, err := strconv.ParseUint(g, 10, 32); err == nil {
					cred.Groups = append(cred.Groups, uint32(n))
				}
			}
		}
		a.cred = cred
	}
	return a, nil
}

// defaultWorkDir is where contexts start unless told otherwise.
func (s *Server) defaultWorkDir() string {
	if s.cfg.WorkDir != "" {
		return s.cfg.WorkDir
	}
	if a, err := s.account(); err == nil && a.home != "" {
		if st, err := os.Stat(a.home); err == nil && st.IsDir() {
			return a.home
		}
	}
	return "/"
}

// env is the environment workers start with: the server's own, with the
// account's identity variables.
func (a *account) env() []string {
	set := map[string]string{"HOME": a.home, "USER": a.name, "LOGNAME": a.name}
	var out []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if _, ok := set[k]; !ok {
			out = append(out, kv)
		}
	}
	for k, v := range set {
		if v != "" {
			out = append(out, k+"="+v)
		}
	}
	if os.Getenv("PATH") == "" {
		out = append(out, "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
	}
	return out
}

// proc is a worker process in its own process group, so an interrupt or a
// kill reaches the subprocesses the user's code started too.
type proc struct {
	cmd    *exec.Cmd
	pid    int
	stdin  io.WriteCloser
	exited chan struct{} // closed once the process has exited
	once   sync.Once
	killed atomic.Bool
}

// startProc starts cmd with piped stdin, stdout and stderr.
func startProc(cmd *exec.Cmd, a *account, dir string, extraEnv ...string) (*proc, io.ReadCloser, io.ReadCloser, error) {
	cmd.Dir = dir
	cmd.Env = append(a.env(), extraEnv...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: a.cred}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, nil, nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, nil, err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, nil, nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, nil, nil, err
	}
	p := &proc{cmd: cmd, pid: cmd.Process.Pid, stdin: stdin, exited: make(chan struct{})}
	go p.wait()
	return p, stdout, stderr, nil
}

// wait notices the process's exit. In forkbox-agent, PID 1's reaper may
// collect the status first; Process.Wait then fails with ECHILD, which
// equally means the process is gone. Stragglers in the group are killed so
// the pipes they hold close.
func (p *proc) wait() {
	p.cmd.Process.Wait()
	p.cmd.Process.Release()
	close(p.exited)
	syscall.Kill(-p.pid, syscall.SIGKILL)
}

// alive reports whether the process is still running and not being killed.
func (p *proc) alive() bool {
	if p.killed.Load() {
		return false
	}
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// signal sends sig to the process group.
func (p *proc) signal(sig syscall.Signal) {
	if p.alive() {
		syscall.Kill(-p.pid, sig)
	}
}

// interruptRepeat is how often an interrupt is re-sent while the cell has
// not finished: a SIGINT that lands between two commands (or while Python
// is outside user code) has nothing to stop, so one is not enough.
const interruptRepeat = 500 * time.Millisecond

// interrupter interrupts a cell once its request is cancelled: send (SIGINT
// to the process group) at once and, unless once, every interruptRepeat
// after, and expired fires when the grace period is over. Use its channels
// in a select.
type interrupter struct {
	send    func()
	grace   time.Duration
	once    bool
	done    <-chan struct{} // the request's ctx.Done(); nil once handled
	repeat  <-chan time.Time
	expired <-chan time.Time
	ticker  *time.Ticker
	timer   *time.Timer
}

// newInterrupter interrupts with send, or with SIGINT to p's process group
// when send is nil.
func newInterrupter(ctx context.Context, p *proc, grace time.Duration, send func(), once bool) *interrupter {
	if send == nil {
		send = func() { p.signal(syscall.SIGINT) }
	}
	return &interrupter{send: send, grace: grace, once: once, done: ctx.Done()}
}

// start sends the first interrupt and arms the repeat and the deadline.
func (in *interrupter) start() {
	in.done = nil
	in.send()
	in.timer = time.NewTimer(in.grace)
	in.expired = in.timer.C
	if !in.once {
		in.ticker = time.NewTicker(interruptRepeat)
		in.repeat = in.ticker.C
	}
}

func (in *interrupter) resend() { in.send() }

func (in *interrupter) stop() {
	if in.ticker != nil {
		in.ticker.Stop()
	}
	if in.timer != nil {
		in.timer.Stop()
	}
}

// kill stops the whole process group.
func (p *proc) kill() {
	p.once.Do(func() {
		p.killed.Store(true)
		p.stdin.Close()
		syscall.Kill(-p.pid, syscall.SIGKILL)
	})
}

// tail keeps the last lines a worker wrote to stderr, for error messages.
type tail struct {
	mu    sync.Mutex
	lines []string
}

func (t *tail) add(line string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lines = append(t.lines, line)
	if len(t.lines) > 20 {
		t.lines = t.lines[len(t.lines)-20:]
	}
}

// reset forgets the lines so far.
func (t *tail) reset() {
	t.mu.Lock()
	t.lines = nil
	t.mu.Unlock()
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.Join(t.lines, "\n")
}

// logStderr logs what a worker writes to its own stderr (before it
// redirects it, or if it crashes) and remembers the last lines.
func logStderr(log *slog.Logger, r io.ReadCloser, t *tail) {
	defer r.Close()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		t.add(sc.Text())
		log.Debug("code interpreter worker stderr", "line", sc.Text())
	}
}
