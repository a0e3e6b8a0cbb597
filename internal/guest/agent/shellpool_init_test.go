package agent_test

import (
	"fmt"
	"maps"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/forkbox/forkbox/internal/guest/agent"
)

// postInit sends body to ta's /init and fails unless it answers 204.
func (ta *testAgent) postInit(t *testing.T, body string) {
	t.Helper()
	if code, out := ta.do(t, http.MethodPost, "/init", strings.NewReader(body), nil); code != http.StatusNoContent {
		t.Fatalf("/init %s: %d %s", body, code, out)
	}
}

// TestCommandPoolAcrossInit: an /init that changes nothing a new process
// starts with (every resume, and a create from the warm pool without envs)
// keeps the ready shell, and the first command after it is pooled; one that
// changes the environment or the CPU mask drops it, and the next command
// sees the new environment.
func TestCommandPoolAcrossInit(t *testing.T) {
	pp := newPooledPair(t)
	pp.warm(t)
	ready := agent.CommandPoolIdlePIDs(pp.pooled.agent)
	seeds := agent.CommandPoolSeeds(pp.pooled.agent)
	pp.pooled.postInit(t, `{"envVars":{"FROM_INIT":"x"},"commandPool":1}`)
	if got := agent.CommandPoolIdlePIDs(pp.pooled.agent); !maps.Equal(got, ready) {
		t.Fatalf("idle shells after an /init that changed nothing: %v, before %v", got, ready)
	}
	// A kept shell draws its RANDOM seed anew at every /init (clones of one
	// image must differ); three equal 16-bit draws in a row: 2^-48.
	for i := 0; slices.Equal(agent.CommandPoolSeeds(pp.pooled.agent), seeds); i++ {
		if i == 2 {
			t.Fatalf("the kept shell's RANDOM seed %v did not change in 3 /inits", seeds)
		}
		pp.pooled.postInit(t, `{"envVars":{"FROM_INIT":"x"},"commandPool":1}`)
	}
	res := pp.run(t, loginShell("echo $$ $FROM_INIT"), true)
	var pid int
	if _, err := fmt.Sscanf(res.stdout, "%d x\n", &pid); err != nil || !ready[pid] {
		t.Fatalf("stdout %q: want a ready shell's pid (%v) and x", res.stdout, ready)
	}

	pp.warm(t)
	pp.pooled.postInit(t, `{"envVars":{"FROM_INIT":"y"}}`)
	if n := agent.CommandPoolIdle(pp.pooled.agent); n != 0 {
		t.Fatalf("%d idle shells after an /init that changed the environment", n)
	}
	if res := pp.run(t, loginShell("echo $FROM_INIT"), true); res.stdout != "y\n" {
		t.Fatalf("stdout %q after the environment changed, want y", res.stdout)
	}

	if runtime.NumCPU() < 2 {
		return
	}
	pp.warm(t)
	pp.pooled.postInit(t, `{"cpuCount":1}`)
	// The agent runs in this process: give the tests their CPUs back.
	defer pp.pooled.postInit(t, fmt.Sprintf(`{"cpuCount":%d}`, runtime.NumCPU()))
	if n := agent.CommandPoolIdle(pp.pooled.agent); n != 0 {
		t.Fatalf("%d idle shells after an /init that changed the CPU mask", n)
	}
	if res := pp.run(t, loginShell("nproc"), false); res.stdout != "1\n" {
		t.Fatalf("nproc %q after cpuCount 1", res.stdout)
	}
}

// TestWarmFillsCommandPool: POST /forkbox/warm answers once the command
// pool holds a ready shell, so a create that takes a warm pool's sandbox
// finds one for its first command.
func TestWarmFillsCommandPool(t *testing.T) {
	ta := startAgent(t, agent.Config{CommandPool: 1})
	ta.warm(t)
	if n := agent.CommandPoolIdle(ta.agent); n != 1 {
		t.Fatalf("%d ready shells after warming, want 1", n)
	}
	ta.postInit(t, `{"commandPool":1}`)
	hits := agent.CommandPoolHits(ta.agent)
	if res := ta.runProcess(t, connect.NewRequest(loginShell("echo first"))); res.stdout != "first\n" || agent.CommandPoolHits(ta.agent) != hits+1 {
		t.Fatalf("first command after warm and /init: %q, pooled %v", res.stdout, agent.CommandPoolHits(ta.agent) != hits)
	}
}

// TestCommandPoolProfileReplaced: a profile replaced by a rename with the
// same size and mtime (as `cp -p` and `mv` would leave it) still makes the
// ready shell stale; the fingerprint has no inode number (gVisor renumbers
// files in every restore), so it is the ctime that shows the change.
func TestCommandPoolProfileReplaced(t *testing.T) {
	home := t.TempDir()
	profile := home + "/.bash_profile"
	if err := os.WriteFile(profile, []byte("export FROM_PROFILE=old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ta := startAgent(t, agent.Config{CommandPool: 1, EnvVars: map[string]string{"HOME": home}})
	ta.runProcess(t, connect.NewRequest(loginShell("true")))
	waitFor(t, func() bool { return agent.CommandPoolIdle(ta.agent) > 0 })
	st, err := os.Stat(profile)
	if err != nil {
		t.Fatal(err)
	}
	tmp := home + "/.bash_profile.new"
	if err := os.WriteFile(tmp, []byte("export FROM_PROFILE=new\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(tmp, st.ModTime(), st.ModTime()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond) // a ctime the old file's cannot equal
	if err := os.Rename(tmp, profile); err != nil {
		t.Fatal(err)
	}
	if res := ta.runProcess(t, connect.NewRequest(loginShell("echo $FROM_PROFILE"))); res.stdout != "new\n" {
		t.Fatalf("stdout %q after the profile was replaced, want new", res.stdout)
	}
}
