package sandbox

import (
	"context"
	"testing"

	"github.com/forkbox/forkbox/internal/errdefs"
)

// TestHandOffSkipsHeld: a drain does not hand a paused sandbox to another
// node while this node answers a request for it (Hold) — the request,
// told the sandbox is here, would find it gone (CI: a GET forwarded to a
// draining node answered 404); it goes at the next call once released.
func TestHandOffSkipsHeld(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	e.m.cfg.SharedImages = true
	sb := e.create(t, CreateRequest{})
	if err := e.m.Pause(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	e.waitState(t, sb.ID, StatePaused)
	pick := func(context.Context) (string, error) { return "node-b", nil }

	release := e.m.Hold(sb.ID)
	if n, err := e.m.HandOffPaused(ctx, pick); err != nil || n != 0 {
		t.Fatalf("hand-off of a held sandbox: %d moved, %v", n, err)
	}
	if _, err := e.m.Get(ctx, sb.ID); err != nil {
		t.Fatalf("held sandbox gone: %v", err)
	}
	release()
	release() // a second call is harmless
	if n, err := e.m.HandOffPaused(ctx, pick); err != nil || n != 1 {
		t.Fatalf("hand-off once released: %d moved, %v", n, err)
	}
	if _, err := e.m.Get(ctx, sb.ID); !errdefs.IsNotFound(err) {
		t.Fatalf("handed-off sandbox still here: %v", err)
	}
	rec, err := e.st.GetSandbox(ctx, sb.ID)
	if err != nil || rec.ClientID != "node-b" {
		t.Fatalf("record after hand-off: %+v, %v", rec, err)
	}
	if len(e.m.held) != 0 {
		t.Errorf("holds left: %v", e.m.held)
	}
}
