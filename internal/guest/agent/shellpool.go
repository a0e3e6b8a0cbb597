package agent

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	pb "github.com/forkbox/forkbox/api/gen/process"
)

// The command pool: what the E2B SDKs send for commands.run is
// `/bin/bash -l -c <cmd>`, and under gVisor most of its cost is starting that
// login shell (the process, the dynamic loader, bash itself, the profile
// files), not the command. The agent keeps a few login shells started ahead
// of time for the configuration the last such request had (user, cwd,
// environment), each stopped after its profile ran and before anything of
// the command exists. A matching request hands its command to one: the shell
// evaluates it in the same process, so the pid, $$, $0, $PPID, process
// group, environment (profile variables included), cwd, credentials, limits,
// stdin/stdout/stderr pipes, exit status and signals are those a fresh
// `bash -l -c` would have had. What cannot be the same is listed in README
// (/proc/<pid>/cmdline shows the wrapper, the process started earlier).
// Anything else falls back to a fresh start: a PTY, another argv, an
// environment, cwd or user the shell was not started with, profile files
// changed since, a command bash would not parse, a profile that printed or
// failed.

// poolRefillDelay is how long a refill waits for the command that emptied
// the pool to end, so the refill does not compete with it for the CPU.
const poolRefillDelay = 100 * time.Millisecond

// refillAfterEnd is how long a refill waits after the command ended: its
// login shell's start competed for the CPU with sending the command's end
// to the client (and with the proxy's and the client's own work on the
// host), which cost commands.run("echo hi") ~1.5 ms of its ~13.
const refillAfterEnd = 10 * time.Millisecond

// initFillDelay is how long after /init the pool starts filling.
const initFillDelay = time.Second

// poolReadyTimeout bounds how long a new shell may take to run its profile.
const poolReadyTimeout = 10 * time.Second

// maxPooledCmd is the longest command handed to a pooled shell; longer
// ones start fresh.
const maxPooledCmd = 16 << 10

// poolWrapper is the -c script of a pooled shell, run after the profile.
// It reports ready ("r", or "x" when the profile's last status was not 0,
// which a fresh shell's command would see in $?, or when /bin/bash is not
// bash — an image without bash gets a /bin/bash that runs /bin/sh, which
// cannot run the rest of this script), waits for the agent's message on
// fd 3 (handOver: a 16-byte header of RANDOM seed, stdin wanted and the
// command's length in bytes, then the command), restores what a fresh
// shell would show ($_ from the profile, SECONDS from zero, a fresh RANDOM
// sequence so clones of one image differ, BASH_EXECUTION_STRING) and
// evaluates the command as -c does.
//
// The reads are sized (read -N, bytes under LC_ALL=C, from -u 3 without a
// redirection): bash then takes each part in one read(2), where a
// delimited read takes one per byte, and a redirection four more calls;
// a syscall costs ~40 us under gVisor's systrap, and "echo hi" took 62
// calls after the ready byte that way against 25 now.
const poolWrapper = `__fb_q=$? __fb_u=$_; if [ "$__fb_q" = 0 ] && [ -n "$BASH_VERSION" ]; then printf r >&4; else printf x >&4; fi; exec 4>&-; ` +
	`LC_ALL=C IFS= read -r -N 16 -u 3 __fb_h && LC_ALL=C IFS= read -r -N $((10#${__fb_h:6:10})) -u 3 __fb_c || kill -KILL $$; exec 3<&-; ` +
	`[ "${__fb_h:5:1}" = 1 ] || exec </dev/null; RANDOM=$((10#${__fb_h:0:5})); SECONDS=0; ` +
	`eval "unset __fb_q __fb_h __fb_c __fb_u; BASH_EXECUTION_STRING=${__fb_c@Q}; : ${__fb_u@Q}; $__fb_c"`

// shellPool holds the ready shells of one configuration at a time.
type shellPool struct {
	a   *Agent
	log *slog.Logger

	mu      sync.Mutex
	size    int            // guarded by mu; 0: the pool is off
	idle    []*pooledShell // guarded by mu
	recipe  *poolRecipe    // guarded by mu; what to fill with, nil: nothing yet
	filling bool           // guarded by mu
	gen     uint64         // guarded by mu; bumped by discard, stale fills drop their shell
	badKey  string         // guarded by mu; a key whose shells proved unusable
	key     string         // guarded by mu; the configuration of the last shell started
	missKey string         // guarded by mu; the configuration of the last miss since a hit

	hits atomic.Uint64 // commands run by a pooled shell
}

// poolRecipe is the request shape shells are started for.
type poolRecipe struct {
	acct *account
	cwd  *string
	envs map[string]string
}

// pooledShell is one started, waiting login shell.
type pooledShell struct {
	pid    int
	key    string
	home   string                    // HOME, whose profile files fp describes
	fp     string                    // profileFingerprint(home) before the shell started
	status <-chan syscall.WaitStatus // from the reaper; the watcher reads it
	fwd    chan syscall.WaitStatus   // the status, once the shell was taken
	taken  bool                      // guarded by shellPool.mu

	seed uint16 // the command's RANDOM seed, drawn when the shell started

	ctl                   *os.File // the shell's fd 3, written once (blocking: no poller calls)
	stdin, stdout, stderr *os.File // parent ends
}

// maxPoolSize bounds the pool: each idle shell costs about 1 MiB.
const maxPoolSize = 4

func newShellPool(a *Agent, size int) *shellPool {
	return &shellPool{a: a, log: a.log, size: min(max(size, 0), maxPoolSize)}
}

// enabled reports whether the pool is on.
func (sp *shellPool) enabled() bool {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	return sp.size > 0
}

// resize sets how many shells the pool keeps (0: none, the pool is off;
// at most maxPoolSize); the next discard or fill applies it.
func (sp *shellPool) resize(n int) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	sp.size = min(max(n, 0), maxPoolSize)
}

// poolable reports whether req has the one shape a pooled shell can run
// and returns its command.
func poolable(req *pb.StartRequest) (string, bool) {
	cfg := req.GetProcess()
	args := cfg.GetArgs()
	if req.Pty != nil || cfg.GetCmd() != "/bin/bash" || len(args) != 3 || args[0] != "-l" || args[1] != "-c" {
		return "", false
	}
	cmd := args[2]
	if len(cmd) > maxPooledCmd || bytes.IndexByte([]byte(cmd), 0) >= 0 || !evalSafe(cmd) {
		return "", false
	}
	return cmd, true
}

// take removes a ready shell matching s's configuration from the pool and
// returns it, or nil when there is none (the caller then starts fresh).
// req must be poolable; on a second miss in a row with its configuration
// it becomes what the pool refills with.
func (sp *shellPool) take(req *pb.StartRequest, acct *account, s spawn) *pooledShell {
	key := spawnKey(s)
	sp.mu.Lock()
	defer sp.mu.Unlock()
	for i, sh := range sp.idle {
		if sh.key == key {
			sp.idle = append(sp.idle[:i], sp.idle[i+1:]...)
			sh.taken = true
			sp.hits.Add(1)
			sp.missKey = ""
			return sh
		}
	}
	sp.dropStaleLocked()
	// A miss. For the pool's own configuration it is only being refilled.
	// Another configuration takes the pool over when it misses twice in a
	// row, so one odd request does not throw the ready shells away.
	if sp.recipe == nil || (key != sp.key && key == sp.missKey) {
		sp.recipe = &poolRecipe{acct: acct, cwd: req.GetProcess().Cwd, envs: req.GetProcess().GetEnvs()}
		sp.key, sp.missKey = key, ""
		sp.dropLocked()
	} else if key != sp.key {
		sp.missKey = key
	}
	return nil
}

// idlePIDs returns the pids of the shells waiting in the pool.
func (sp *shellPool) idlePIDs() map[int]bool {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	pids := make(map[int]bool, len(sp.idle))
	for _, sh := range sp.idle {
		pids[sh.pid] = true
	}
	return pids
}

// refillAfter fills the pool through afterEnd.
func (sp *shellPool) refillAfter(done <-chan struct{}, busy time.Duration) {
	if !sp.enabled() {
		return
	}
	go afterEnd(done, busy, sp.fill)
}

// afterEnd calls fill refillAfterEnd after done is closed, or at
// poolRefillDelay if done is still open then, but not before busy has
// passed: the host said (hostBusy) it stays busy with other sandboxes'
// requests that long, and a login shell's start would compete with them.
func afterEnd(done <-chan struct{}, busy time.Duration, fill func()) {
	start := time.Now()
	t := time.NewTimer(poolRefillDelay)
	defer t.Stop()
	select {
	case <-done:
		time.Sleep(refillAfterEnd)
	case <-t.C:
	}
	if wait := busy - time.Since(start); wait > 0 {
		time.Sleep(wait)
	}
	fill()
}

// renew is /init's. When stale (the /init changed what a new process
// gets: environment, user, workdir, CPU mask) the idle shells are killed and
// the recipe's environment snapshot forgotten. Otherwise they stay: the
// shell a restored image carried (a warm pool's sandbox, a paused one, the
// source of a clone or a rollback) serves the first command, with a RANDOM
// seed drawn anew here. A pool short of
// shells fills for the default user after initFillDelay (or after the
// first command, whichever is first): a login shell started at once would
// compete with the create's first command for the CPU.
func (sp *shellPool) renew(acct *account, stale bool) {
	sp.mu.Lock()
	if stale || sp.size == 0 {
		sp.dropLocked()
	}
	for len(sp.idle) > sp.size {
		last := sp.idle[len(sp.idle)-1]
		_ = syscall.Kill(last.pid, syscall.SIGKILL)
		sp.idle = sp.idle[:len(sp.idle)-1]
	}
	// The kept shells came through a restore, maybe into many clones: each
	// draws its RANDOM seed anew so clones of one image differ.
	for _, sh := range sp.idle {
		sh.seed = drawSeed()
	}
	if sp.size == 0 {
		sp.mu.Unlock()
		return
	}
	if acct != nil && (stale || sp.recipe == nil) {
		sp.recipe = &poolRecipe{acct: acct}
	}
	full := len(sp.idle) >= sp.size
	sp.mu.Unlock()
	if !full {
		time.AfterFunc(initFillDelay, sp.fill)
	}
}

// spawnView names what a new process of the default user starts with:
// user, workdir and the whole environment (/init's envs and what /init
// turns on, such as the egress CA's variable). The pool's ready shells
// were started under one view and stay usable while it is unchanged.
func (a *Agent) spawnView() string {
	user, workdir := a.state.defaults()
	view := user + "\x00" + workdir + "\x00"
	if acct, err := a.namedAccount(""); err == nil {
		view += strings.Join(a.processEnv(acct, nil, false), "\x00")
	}
	return view
}

// fillFor fills the pool for acct now (when it has no recipe yet) and
// returns once it is full or a shell failed to start.
func (sp *shellPool) fillFor(acct *account) {
	sp.mu.Lock()
	if sp.recipe == nil {
		sp.recipe = &poolRecipe{acct: acct}
	}
	sp.mu.Unlock()
	sp.fill()
}

// dropStaleLocked kills the idle shells started before one of their
// profile files changed: they cannot match any request again.
func (sp *shellPool) dropStaleLocked() {
	kept := sp.idle[:0]
	for _, sh := range sp.idle {
		if profileFingerprint(sh.home) == sh.fp {
			kept = append(kept, sh)
			continue
		}
		_ = syscall.Kill(sh.pid, syscall.SIGKILL)
	}
	sp.idle = kept
}

// dropLocked kills the idle shells; their watchers close their files.
func (sp *shellPool) dropLocked() {
	sp.gen++
	for _, sh := range sp.idle {
		_ = syscall.Kill(sh.pid, syscall.SIGKILL)
	}
	sp.idle = nil
}

// fill starts shells until the pool is full, one at a time.
func (sp *shellPool) fill() {
	sp.mu.Lock()
	if sp.filling || sp.recipe == nil {
		sp.mu.Unlock()
		return
	}
	sp.filling = true
	sp.mu.Unlock()
	defer func() {
		sp.mu.Lock()
		sp.filling = false
		sp.mu.Unlock()
	}()
	for {
		sp.mu.Lock()
		rc, gen, full := sp.recipe, sp.gen, len(sp.idle) >= sp.size
		sp.mu.Unlock()
		if full || rc == nil {
			return
		}
		sh, err := sp.startShell(rc)
		if err != nil {
			sp.log.Debug("command pool: no shell started", "err", err)
			return
		}
		sp.mu.Lock()
		if sp.gen != gen {
			sp.mu.Unlock()
			_ = syscall.Kill(sh.pid, syscall.SIGKILL)
			continue
		}
		sp.idle = append(sp.idle, sh)
		sp.mu.Unlock()
	}
}

// watch waits for the shell's end: an idle one is removed from the pool
// and its files closed; a taken one's status is passed on to its process.
func (sp *shellPool) watch(sh *pooledShell) {
	ws := <-sh.status
	sp.mu.Lock()
	for i, s := range sp.idle {
		if s == sh {
			sp.idle = append(sp.idle[:i], sp.idle[i+1:]...)
			break
		}
	}
	taken := sh.taken
	sp.mu.Unlock()
	if taken {
		sh.fwd <- ws
		return
	}
	sh.closeAll()
}

func (sh *pooledShell) closeAll() {
	for _, f := range []*os.File{sh.ctl, sh.stdin, sh.stdout, sh.stderr} {
		if f != nil {
			f.Close()
		}
	}
}

// drawSeed draws a RANDOM seed for a shell. It is drawn ahead of the
// command (when the shell starts, or at /init for a kept one): at hand-over
// it would be one more syscall (~0.1 ms under systrap) on the command's path.
func drawSeed() uint16 {
	var b [2]byte
	_, _ = rand.Read(b[:]) // never fails on Linux (crypto/rand panics instead)
	return uint16(b[0])<<8 | uint16(b[1])
}

// handOver sends the shell its command. stdin false makes the shell read
// /dev/null, as a fresh process without stdin does.
func (sh *pooledShell) handOver(cmd string, stdin bool) error {
	seed := sh.seed
	in := "0"
	if stdin {
		in = "1"
	}
	msg := fmt.Sprintf("%05d%s%010d%s", seed, in, len(cmd), cmd)
	_, err := sh.ctl.Write([]byte(msg))
	sh.ctl.Close()
	sh.ctl = nil
	return err
}

// waitReady reads the shell's ready byte within poolReadyTimeout.
func waitReady(ready *os.File) (byte, error) {
	_ = ready.SetReadDeadline(time.Now().Add(poolReadyTimeout))
	var b [1]byte
	_, err := ready.Read(b[:])
	return b[0], err
}
