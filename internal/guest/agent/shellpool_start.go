package agent

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	pb "github.com/forkbox/forkbox/api/gen/process"
)

// errPoolUnusable marks a shell whose profile printed or failed, or that
// is not bash: its configuration is not pooled until the profile files
// change.
var errPoolUnusable = errors.New("/bin/bash is not bash, or the login profile printed output or ended with a non-zero status")

// startShell starts one login shell for rc and waits until its profile ran.
func (sp *shellPool) startShell(rc *poolRecipe) (*pooledShell, error) {
	req := &pb.StartRequest{Process: &pb.ProcessConfig{
		Cmd: "/bin/bash", Args: []string{"-l", "-c", poolWrapper}, Cwd: rc.cwd, Envs: rc.envs,
	}}
	s, err := sp.a.buildSpawn(req, rc.acct)
	if err != nil {
		return nil, err
	}
	key := spawnKey(s)
	sp.mu.Lock()
	bad := sp.badKey == key
	sp.key = key
	sp.mu.Unlock()
	if bad {
		return nil, errPoolUnusable
	}
	home := envValue(s.cmd.Env, "HOME")
	sh := &pooledShell{key: key, home: home, fp: profileFingerprint(home), seed: drawSeed(), fwd: make(chan syscall.WaitStatus, 1)}
	var ends shellEnds
	pid, status, err := sp.a.reaper.start(func() (int, error) {
		if err := ends.open(s.cmd, sh); err != nil {
			return 0, err
		}
		if err := s.cmd.Start(); err != nil {
			return 0, err
		}
		return s.cmd.Process.Pid, nil
	})
	ends.closeChild()
	if err != nil {
		ends.closeParent(sh)
		return nil, err
	}
	_ = s.cmd.Process.Release()
	limitChild(pid)
	sh.pid, sh.status = pid, status
	sp.a.onStarted()
	go sp.watch(sh)
	b, err := waitReady(ends.ready)
	ends.ready.Close()
	if err == nil && (b != 'r' || pending(sh.stdout) || pending(sh.stderr)) {
		sp.mu.Lock()
		sp.badKey = key
		sp.mu.Unlock()
		err = errPoolUnusable
	}
	if err != nil {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		return nil, fmt.Errorf("pooled shell %d: %w", pid, err)
	}
	return sh, nil
}

// shellEnds are the pipes of a shell being started.
type shellEnds struct {
	child []*os.File // closed once the child has them
	ready *os.File   // parent's end of fd 4
}

// open makes the shell's pipes: stdin, stdout, stderr, fd 3 (the command
// in) and fd 4 (ready out).
func (e *shellEnds) open(cmd *exec.Cmd, sh *pooledShell) error {
	pair := func(childReads bool) (parent *os.File, err error) {
		r, w, err := os.Pipe()
		if err != nil {
			return nil, err
		}
		if childReads {
			e.child = append(e.child, r)
			return w, nil
		}
		e.child = append(e.child, w)
		return r, nil
	}
	var err error
	if sh.stdin, err = pair(true); err != nil {
		return err
	}
	if sh.stdout, err = pair(false); err != nil {
		return err
	}
	if sh.stderr, err = pair(false); err != nil {
		return err
	}
	if sh.ctl, err = e.blockingPair(); err != nil {
		return err
	}
	if e.ready, err = pair(false); err != nil {
		return err
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = e.child[0], e.child[1], e.child[2]
	cmd.ExtraFiles = []*os.File{e.child[3], e.child[4]}
	return nil
}

// blockingPair makes fd 3's pipe without the poller: the agent writes it
// once, into an empty pipe, so it never waits, and closing a polled pipe
// costs an epoll_ctl more on the command's path.
func (e *shellEnds) blockingPair() (*os.File, error) {
	var fds [2]int
	if err := unix.Pipe2(fds[:], unix.O_CLOEXEC); err != nil {
		return nil, err
	}
	e.child = append(e.child, os.NewFile(uintptr(fds[0]), "|0"))
	return os.NewFile(uintptr(fds[1]), "|1"), nil
}

func (e *shellEnds) closeChild() {
	for _, f := range e.child {
		f.Close()
	}
}

func (e *shellEnds) closeParent(sh *pooledShell) {
	sh.closeAll()
	if e.ready != nil {
		e.ready.Close()
	}
}

// pending reports whether a pipe holds unread bytes. It asks through
// SyscallConn, not Fd: Fd turns the pipe blocking, and a blocking read
// holds an OS thread in the kernel until output comes, which the Go
// runtime answers with thread hand-offs that cost a pooled command's
// output ~1 ms under gVisor (a pollable pipe is read once epoll says so).
func pending(f *os.File) bool {
	rc, err := f.SyscallConn()
	if err != nil {
		return true
	}
	n := 0
	cerr := rc.Control(func(fd uintptr) { n, err = unix.IoctlGetInt(int(fd), unix.TIOCINQ) })
	return cerr != nil || err != nil || n > 0
}

// spawnKey is everything of a prepared process a pooled shell must share
// with it: credentials, cwd, environment and the profile files' state.
func spawnKey(s spawn) string {
	var b strings.Builder
	if c := s.cmd.SysProcAttr.Credential; c != nil {
		fmt.Fprintf(&b, "%d:%d:%v\x00", c.Uid, c.Gid, c.Groups)
	}
	b.WriteString(s.cmd.Dir + "\x00")
	b.WriteString(strings.Join(s.cmd.Env, "\x00") + "\x00")
	b.WriteString(profileFingerprint(envValue(s.cmd.Env, "HOME")))
	return b.String()
}

// etcProfile and homeProfile are the names a bash login shell reads (and
// Debian's ~/.profile tests for) in /etc and in the home, besides all of
// /etc/profile.d and ~/.local/bin. profileFingerprint watches them and
// profileStamp stats them: one list, so the two cannot drift apart.
var (
	etcProfile  = []string{"profile", "bash.bashrc", "profile.d"}
	homeProfile = []string{".bash_profile", ".bash_login", ".profile", ".bashrc", "bin"}
)

// profileFingerprint names the state of the files a bash login shell reads
// (and of the directories Debian's ~/.profile tests for), so a shell started
// before one of them changed is not used. fileStamps remembers it until
// one of those names changes.
func profileFingerprint(home string) string {
	dirs := []stampDir{{"/etc", etcProfile}, {"/etc/profile.d", nil}}
	if home != "" {
		dirs = append(dirs, stampDir{home, append(slices.Clip(homeProfile), ".local")},
			stampDir{filepath.Join(home, ".local"), []string{"bin"}})
	}
	return fileStamps.stamp("profile\x00"+home, dirs, func() (string, bool) { return profileStamp(home) })
}

// profileStamp is profileFingerprint read from the files.
func profileStamp(home string) (string, bool) {
	var paths []string
	for _, n := range etcProfile {
		paths = append(paths, filepath.Join("/etc", n))
	}
	if d, err := os.ReadDir("/etc/profile.d"); err == nil {
		for _, e := range d {
			paths = append(paths, filepath.Join("/etc/profile.d", e.Name()))
		}
	}
	if home != "" {
		for _, n := range append(slices.Clip(homeProfile), ".local/bin") {
			paths = append(paths, filepath.Join(home, n))
		}
	}
	return stampFiles(slices.Compact(paths)...)
}

// stampFiles names the state of files by size, mtime and ctime, "-" for
// one that is missing, and reports whether none of them is a symlink (a
// dirWatch may remember the stamp only then: the target can change where
// no watch sees it); a symlink is stamped by its target. No inode number:
// gVisor numbers a file anew in every restore (/etc/profile: 42 before a
// pause, 100 after), which would make a restored sandbox's state look
// changed. A file replaced by a rename still shows, by its ctime.
func stampFiles(paths ...string) (stamp string, noLinks bool) {
	var b []byte
	noLinks = true
	for _, p := range paths {
		var st unix.Stat_t
		err := unix.Lstat(p, &st)
		if err == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
			noLinks = false
			err = unix.Stat(p, &st)
		}
		if err != nil {
			b = append(b, '-', 0)
			continue
		}
		b = strconv.AppendInt(b, st.Size, 10)
		b = strconv.AppendInt(append(b, ':'), st.Mtim.Nano(), 10)
		b = strconv.AppendInt(append(b, ':'), st.Ctim.Nano(), 10)
		b = append(b, 0)
	}
	return string(b), noLinks
}
