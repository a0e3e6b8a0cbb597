package integration

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/forkbox/forkbox/client"
	"github.com/forkbox/forkbox/internal/daemon/daemontest"
)

// stateScript holds a random token and a counter in a Python process's
// memory and keeps writing "token:count" to /tmp/state: if a restore lost
// the process's memory, the token would change or the count restart.
const stateScript = `import os, time, uuid
token = uuid.uuid4().hex
i = 0
while True:
    i += 1
    with open("/tmp/state.tmp", "w") as f:
        f.write("%s:%d" % (token, i))
    os.replace("/tmp/state.tmp", "/tmp/state")
    time.sleep(0.05)
`

// startState launches stateScript in the background and waits for it.
func startState(t *testing.T, ctx context.Context, conn *client.SandboxConn) {
	t.Helper()
	if err := conn.WriteFile(ctx, "/tmp/state.py", []byte(stateScript)); err != nil {
		t.Fatal(err)
	}
	sh(t, ctx, conn, "nohup python3 /tmp/state.py >/dev/null 2>&1 &")
	waitFor(t, 10*time.Second, func() bool {
		_, n := readState(ctx, conn)
		return n > 0
	})
}

// readState returns the token and count the Python process last wrote.
func readState(ctx context.Context, conn *client.SandboxConn) (string, int) {
	b, err := conn.ReadFile(ctx, "/tmp/state")
	if err != nil {
		return "", 0
	}
	var n int
	tok, cnt, _ := strings.Cut(string(b), ":")
	fmt.Sscan(cnt, &n)
	return tok, n
}

// checkContinues asserts the process behind conn still has token in memory
// and counts on from at least n.
func checkContinues(t *testing.T, ctx context.Context, conn *client.SandboxConn, token string, n int) {
	t.Helper()
	var gotTok string
	var gotN int
	waitFor(t, 5*time.Second, func() bool {
		gotTok, gotN = readState(ctx, conn)
		return gotN > n
	})
	if gotTok != token {
		t.Fatalf("token in memory changed: %q → %q (process restarted?)", token, gotTok)
	}
}

func waitFor(t testing.TB, limit time.Duration, ok func() bool) {
	t.Helper()
	if !eventually(limit, ok) {
		t.Fatalf("condition not met within %s", limit)
	}
}

// eventually reports whether ok held within limit.
func eventually(limit time.Duration, ok func() bool) bool {
	for deadline := time.Now().Add(limit); ; time.Sleep(20 * time.Millisecond) {
		if ok() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

func create(t *testing.T, ctx context.Context, c *client.Client, o client.CreateOptions) *client.Sandbox {
	t.Helper()
	if o.TemplateID == "" {
		o.TemplateID = "base"
	}
	sb, err := c.CreateSandbox(ctx, o)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	return sb
}

func writeFile(t *testing.T, ctx context.Context, conn *client.SandboxConn, path, data string) {
	t.Helper()
	if err := conn.WriteFile(ctx, path, []byte(data)); err != nil {
		t.Fatalf("write %s: %v", path, err)
	}
}

func readFile(t *testing.T, ctx context.Context, conn *client.SandboxConn, path string) string {
	t.Helper()
	b, err := conn.ReadFile(ctx, path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return string(b)
}

func state(t *testing.T, ctx context.Context, c *client.Client, id string) string {
	t.Helper()
	info, err := c.GetSandbox(ctx, id)
	if err != nil {
		t.Fatalf("get %s: %v", id, err)
	}
	return info.State
}

func daemontestContext(t *testing.T) context.Context { return daemontest.Context(t) }

// asError is errors.As for the client's API error type.
func asError(err error, target **client.Error) bool { return errors.As(err, target) }
