package integration

import (
	"testing"
	"time"

	"github.com/forkbox/forkbox/client"
)

// TestTTLExpiry: a sandbox is deleted (or, with autoPause, paused) within
// 2 s of its deadline; timeout can shorten, refresh never shortens; traffic
// to a paused autoResume sandbox resumes it.
func TestTTLExpiry(t *testing.T) {
	ctx := daemontestContext(t)
	_, c := start(t)
	del := create(t, ctx, c, client.CreateOptions{Timeout: 60 * time.Second})
	pau := create(t, ctx, c, client.CreateOptions{Timeout: 60 * time.Second, AutoPause: true, AutoResume: true})
	writeFile(t, ctx, pau.Conn(), "/tmp/kept", "yes")
	// Refresh never shortens.
	if err := c.Refresh(ctx, del.SandboxID, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if info, _ := c.GetSandbox(ctx, del.SandboxID); time.Until(info.EndAt) < 50*time.Second {
		t.Errorf("refresh shortened the deadline to %s", info.EndAt)
	}
	// Timeout replaces, shortening.
	for _, id := range []string{del.SandboxID, pau.SandboxID} {
		if err := c.SetTimeout(ctx, id, 2*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(2 * time.Second)
	waitFor(t, 6*time.Second, func() bool {
		_, err := c.GetSandbox(ctx, del.SandboxID)
		return client.IsNotFound(err)
	})
	if late := time.Since(deadline); late > 2*time.Second {
		t.Errorf("deleted %s after its deadline", late)
	}
	waitFor(t, 6*time.Second, func() bool {
		info, err := c.GetSandbox(ctx, pau.SandboxID)
		return err == nil && info.State == "paused"
	})
	if late := time.Since(deadline); late > 2*time.Second {
		t.Errorf("paused %s after its deadline", late)
	}
	// Data-plane traffic wakes an autoResume sandbox.
	if got := readFile(t, ctx, pau.Conn(), "/tmp/kept"); got != "yes" {
		t.Errorf("after auto-resume: %q", got)
	}
	if st := state(t, ctx, c, pau.SandboxID); st != "running" {
		t.Errorf("state after auto-resume: %s", st)
	}
}
