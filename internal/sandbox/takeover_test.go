package sandbox

import (
	"context"
	"slices"
	"testing"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/images"
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
	pause := []string{images.CacheKey(images.Pause(sb.ID))}
	pick := func(_ context.Context, want []string) (string, error) {
		if !slices.Equal(want, pause) {
			t.Errorf("hand-off wants %q, want the pause image %q", want, pause)
		}
		return "node-b", nil
	}

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

// nodeDir is a NodeDirectory where every node is alive at its own name.
type nodeDir struct{}

func (nodeDir) NodeURL(_ context.Context, node string) (string, bool, error) {
	return "http://" + node, true, nil
}

// TestMoveIfFull: a resume asked of a full node hands its paused sandbox
// to the node placement picks, even while the asking request holds it;
// a node with room, or a pick of this node, keeps it.
func TestMoveIfFull(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	e.m.cfg.SharedImages, e.m.cfg.ClientID, e.m.cfg.MaxSandboxes = true, "node-a", 1
	e.m.SetNodeDirectory(nodeDir{})
	paused := e.create(t, CreateRequest{})
	if err := e.m.Pause(ctx, paused.ID); err != nil {
		t.Fatal(err)
	}
	e.waitState(t, paused.ID, StatePaused)
	pause := []string{images.CacheKey(images.Pause(paused.ID))}
	toB := func(_ context.Context, want []string) (string, error) {
		if !slices.Equal(want, pause) {
			t.Errorf("move wants %q, want the pause image %q", want, pause)
		}
		return "node-b", nil
	}
	self := func(context.Context, []string) (string, error) { return "node-a", nil }
	if node, err := e.m.MoveIfFull(ctx, paused.ID, toB); node != "" || err != nil {
		t.Fatalf("with room: moved to %q, %v", node, err)
	}
	asked := false
	askSelf := func(ctx context.Context, want []string) (string, error) { asked = true; return self(ctx, want) }
	e.m.cfg.FreeMemoryMiB = func() int64 { return MinFreeMemoryMiB + 100 } // less than the sandbox's memory more
	if node, err := e.m.MoveIfFull(ctx, paused.ID, askSelf); node != "" || err != nil || !asked {
		t.Fatalf("short of memory: placement asked %v, moved to %q, %v; want asked, and kept here as it picked this node", asked, node, err)
	}
	e.m.cfg.FreeMemoryMiB, asked = nil, false
	if node, err := e.m.MoveIfFull(ctx, paused.ID, askSelf); node != "" || err != nil || asked {
		t.Fatalf("with room and memory: placement asked %v, moved to %q, %v", asked, node, err)
	}
	e.create(t, CreateRequest{}) // the node is full now
	if node, err := e.m.MoveIfFull(ctx, paused.ID, self); node != "" || err != nil {
		t.Fatalf("placement picked this node: moved to %q, %v", node, err)
	}
	release := e.m.Hold(paused.ID) // the resume's own hold
	defer release()
	if node, err := e.m.MoveIfFull(ctx, paused.ID, toB); node != "node-b" || err != nil {
		t.Fatalf("full: moved to %q, %v; want node-b", node, err)
	}
	if rec, err := e.st.GetSandbox(ctx, paused.ID); err != nil || rec.ClientID != "node-b" {
		t.Fatalf("record after the move: %+v, %v", rec, err)
	}
	if _, err := e.m.Get(ctx, paused.ID); !errdefs.IsNotFound(err) {
		t.Errorf("moved sandbox still here: %v", err)
	}
}
