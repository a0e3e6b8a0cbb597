package agent_test

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	pb "github.com/forkbox/forkbox/api/gen/process"
	"github.com/forkbox/forkbox/internal/guest/agent"
)

// loginShell is what the E2B SDKs send for commands.run(cmd).
func loginShell(cmd string) *pb.StartRequest {
	return &pb.StartRequest{Process: &pb.ProcessConfig{Cmd: "/bin/bash", Args: []string{"-l", "-c", cmd}}}
}

// pooledPair is an agent without the command pool and one with it.
type pooledPair struct{ fresh, pooled *testAgent }

// Both run with a home of their own whose profile sets an exported and a
// shell variable and a function, so the host's profile files matter less.
func newPooledPair(t *testing.T) pooledPair {
	home := t.TempDir()
	profile := "export FROM_PROFILE=p\nPROFILE_LOCAL=l\nprofile_fn() { echo fn; }\n"
	if err := os.WriteFile(home+"/.bash_profile", []byte(profile), 0o644); err != nil {
		t.Fatal(err)
	}
	envs := map[string]string{"FROM_INIT": "x", "HOME": home}
	return pooledPair{
		fresh:  startAgent(t, agent.Config{EnvVars: envs}),
		pooled: startAgent(t, agent.Config{EnvVars: envs, CommandPool: 1}),
	}
}

// warm makes the pooled agent fill its pool (a first command) and waits
// until a shell is ready.
func (pp pooledPair) warm(t *testing.T) {
	t.Helper()
	if agent.CommandPoolIdle(pp.pooled.agent) == 0 {
		pp.pooled.runProcess(t, connect.NewRequest(loginShell("true")))
	}
	waitFor(t, func() bool { return agent.CommandPoolIdle(pp.pooled.agent) > 0 })
}

// run runs req on the pooled agent, failing unless a pooled shell ran it
// (pooled true) or a fresh process did (pooled false).
func (pp pooledPair) run(t *testing.T, req *pb.StartRequest, pooled bool) result {
	t.Helper()
	pp.warm(t)
	hits := agent.CommandPoolHits(pp.pooled.agent)
	res := pp.pooled.runProcess(t, connect.NewRequest(req))
	if got := agent.CommandPoolHits(pp.pooled.agent) > hits; got != pooled {
		t.Fatalf("ran by a pooled shell: %v, want %v", got, pooled)
	}
	return res
}

// expand replaces the process's pid in s with PID and the agent's (the
// test process's) with AGENT: the one thing two runs may not share.
func expand(s string, pid uint32) string {
	s = strings.ReplaceAll(s, fmt.Sprint(pid), "PID")
	return strings.ReplaceAll(s, fmt.Sprint(os.Getpid()), "AGENT")
}

// TestCommandPoolMatchesFresh runs each command both ways and compares
// stdout, stderr, exit code and status: what the command sees of its
// process must not tell a pooled shell from a fresh one.
func TestCommandPoolMatchesFresh(t *testing.T) {
	pp := newPooledPair(t)
	tests := []struct {
		name, cmd string
		pooled    bool // whether the pool may run it
	}{
		{"echo", "echo hi", true},
		{"profile's variables and functions", `echo "$FROM_PROFILE $PROFILE_LOCAL $(profile_fn)"`, true},
		{"environment", "env | sort", true},
		{"shell variables", `declare -p | grep -v -e '^declare -[^ ]* \(BASHPID\|EPOCH[A-Z]*\|RANDOM\|SRANDOM\|SECONDS\|_\)\(=\|$\)' | sort`, true},
		{"identity", `id; pwd; umask; echo "$0|$-|$SHLVL|$#|$_"; shopt login_shell`, true},
		{"pid and parent", `echo "$$ $BASHPID $PPID"; cut -d' ' -f4,5,6 /proc/$$/stat; :`, true},
		// The shell's own signal mask is not compared: bash blocks signals
		// around each fork, and a child reading it races with that.
		{"limits and signals", `ulimit -a; grep -E '^(Uid|Gid|Groups|NoNewPrivs|Cap(Inh|Prm|Eff|Bnd)):' /proc/$$/status; grep -E '^Sig(Blk|Ign):' /proc/self/status; :`, true},
		{"descriptors", `ls /proc/$$/fd; readlink /proc/$$/fd/0 /proc/$$/fd/1 | sed 's/:\[[0-9]*\]//'; :`, true},
		{"status and seconds", `echo "$? $((SECONDS < 2)) ${PIPESTATUS[*]}"; echo "$BASH_EXECUTION_STRING"`, true},
		{"exit code", "echo out; echo err >&2; exit 7", true},
		// The command's length is sent in bytes and read under LC_ALL=C;
		// the command itself runs in the request's locale.
		{"multibyte, backslashes, trailing blanks", "x='h\u00e9llo w\u00f6rld'; printf '%s|' \"$x\" ${#x} 'a\\b' \"${LC_ALL-unset}\" \"$LANG\"; echo \"${#BASH_EXECUTION_STRING}\" \n\t ", true},
		{"multi-line with errors", "echo a\nno-such-command-xyz\necho $LINENO\nfalse", true},
		{"killed by its own signal", "echo before; kill -TERM $$; echo after", true},
		{"trace starts fresh", "set -x; echo traced", false},
		{"external last command starts fresh", "echo a; cat /proc/$$/comm", false},
		{"external after && starts fresh", "true && cat /proc/$$/comm", false},
		{"subshell last starts fresh", "(cat /proc/$$/comm)", false},
		{"pipeline last", "cat /proc/$$/comm | cat", true},
		{"block last", "{ echo a; cat /proc/$$/comm; }", true},
		{"if last", "if true; then cat /proc/$$/comm; fi", true},
		{"for last", "for i in 1; do cat /proc/$$/comm; done", true},
		{"background and wait", "cat /proc/$$/comm & wait", true},
		{"builtin after ||", "false || echo $?", true},
		{"return at top level", "return 3", true},
		{"syntax error starts fresh", "echo a\nfi", false},
		{"unterminated quote starts fresh", "echo 'a", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want := pp.fresh.runProcess(t, connect.NewRequest(loginShell(tc.cmd)))
			if tc.name == "status and seconds" {
				time.Sleep(1100 * time.Millisecond) // a pooled shell older than a second
			}
			got := pp.run(t, loginShell(tc.cmd), tc.pooled)
			if g, w := expand(got.stdout, got.pid), expand(want.stdout, want.pid); g != w {
				t.Errorf("stdout differs:\npooled: %q\nfresh:  %q", got.stdout, want.stdout)
			}
			if got.stderr != want.stderr {
				t.Errorf("stderr differs:\npooled: %q\nfresh:  %q", got.stderr, want.stderr)
			}
			if got.end.GetExitCode() != want.end.GetExitCode() || got.end.GetStatus() != want.end.GetStatus() || got.end.GetExited() != want.end.GetExited() {
				t.Errorf("end differs: pooled %v, fresh %v", got.end, want.end)
			}
		})
	}
}

// TestCommandPoolPidIsShell checks that the pid in the start event is the
// shell's $$ and the process group the SDK's kill signals.
func TestCommandPoolPidIsShell(t *testing.T) {
	pp := newPooledPair(t)
	res := pp.run(t, loginShell(`echo "$$ $(cut -d' ' -f5 /proc/$$/stat)"`), true)
	if want := fmt.Sprintf("%d %d\n", res.pid, res.pid); res.stdout != want {
		t.Fatalf("stdout %q, want $$ and pgrp = start pid %d", res.stdout, res.pid)
	}
}

// TestCommandPoolFallsBack checks that requests a pooled shell cannot run
// exactly as asked start fresh.
func TestCommandPoolFallsBack(t *testing.T) {
	pp := newPooledPair(t)
	cwd := t.TempDir()
	user := "nobody"
	withEnv := loginShell("echo $EXTRA")
	withEnv.Process.Envs = map[string]string{"EXTRA": "e"}
	withCwd := loginShell("pwd")
	withCwd.Process.Cwd = &cwd
	plainSh := &pb.StartRequest{Process: &pb.ProcessConfig{Cmd: "/bin/sh", Args: []string{"-l", "-c", "echo sh"}}}
	for _, tc := range []struct {
		name, want string
		req        *pb.StartRequest
	}{
		{"request env", "e\n", withEnv},
		{"request cwd", cwd + "\n", withCwd},
		{"another argv", "sh\n", plainSh},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if res := pp.run(t, tc.req, false); res.stdout != tc.want {
				t.Fatalf("stdout %q, want %q", res.stdout, tc.want)
			}
		})
	}
	t.Run("another user", func(t *testing.T) {
		pp.warm(t)
		hits := agent.CommandPoolHits(pp.pooled.agent)
		res := pp.pooled.runProcess(t, asUser(connect.NewRequest(loginShell("id -un")), user))
		if res.stdout != "nobody\n" || agent.CommandPoolHits(pp.pooled.agent) != hits {
			t.Fatalf("stdout %q, pooled %v; want nobody from a fresh shell", res.stdout, agent.CommandPoolHits(pp.pooled.agent) != hits)
		}
	})
}

// TestCommandPoolProfileChange checks that a shell started before a
// profile file changed is not used: the next command sees the change.
func TestCommandPoolProfileChange(t *testing.T) {
	home := t.TempDir()
	ta := startAgent(t, agent.Config{CommandPool: 1, EnvVars: map[string]string{"HOME": home}})
	ta.runProcess(t, connect.NewRequest(loginShell("true")))
	waitFor(t, func() bool { return agent.CommandPoolIdle(ta.agent) > 0 })
	if err := os.WriteFile(home+"/.bash_profile", []byte("export FROM_PROFILE=new\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if res := ta.runProcess(t, connect.NewRequest(loginShell("echo $FROM_PROFILE"))); res.stdout != "new\n" {
		t.Fatalf("stdout %q, want the new profile's variable", res.stdout)
	}
	waitFor(t, func() bool { return agent.CommandPoolIdle(ta.agent) > 0 })
	hits := agent.CommandPoolHits(ta.agent)
	if res := ta.runProcess(t, connect.NewRequest(loginShell("echo $FROM_PROFILE"))); res.stdout != "new\n" || agent.CommandPoolHits(ta.agent) != hits+1 {
		t.Fatalf("stdout %q from a refilled pool (hits %d → %d)", res.stdout, hits, agent.CommandPoolHits(ta.agent))
	}
}

// TestCommandPoolKeepsItsConfiguration checks that requests of another
// configuration interleaved with default ones do not empty the pool, and
// that one used twice in a row takes it over.
func TestCommandPoolKeepsItsConfiguration(t *testing.T) {
	pp := newPooledPair(t)
	other := func() *pb.StartRequest {
		r := loginShell("echo $EXTRA")
		r.Process.Envs = map[string]string{"EXTRA": "e"}
		return r
	}
	for range 2 {
		pp.run(t, other(), false)
		pp.run(t, loginShell("echo default"), true)
	}
	pp.run(t, other(), false)
	pp.run(t, other(), false) // the second miss in a row: the pool switches
	waitFor(t, func() bool { return agent.CommandPoolIdle(pp.pooled.agent) > 0 })
	if res := pp.run(t, other(), true); res.stdout != "e\n" {
		t.Fatalf("stdout %q, want e", res.stdout)
	}
}

// TestCommandPoolWaitsForBusyHost: a command whose request carries the
// daemon's busy hint (the host has other sandboxes' requests to serve)
// refills the pool only once the hint's time has passed, not right after
// the command as otherwise.
func TestCommandPoolWaitsForBusyHost(t *testing.T) {
	pp := newPooledPair(t)
	pp.warm(t)
	const busy = 1500 * time.Millisecond
	req := connect.NewRequest(loginShell("true"))
	req.Header().Set("Forkbox-Host-Busy-Ms", fmt.Sprint(busy.Milliseconds()))
	start := time.Now()
	pp.pooled.runProcess(t, req)
	time.Sleep(700 * time.Millisecond) // a refill takes ~10 ms + a shell's start
	if n := agent.CommandPoolIdle(pp.pooled.agent); n != 0 {
		t.Fatalf("the pool refilled %v after a command the host said it was busy %v for", time.Since(start), busy)
	}
	waitFor(t, func() bool { return agent.CommandPoolIdle(pp.pooled.agent) > 0 })
	if took := time.Since(start); took < busy {
		t.Fatalf("refilled after %v, before the hint's %v", took, busy)
	}
}
