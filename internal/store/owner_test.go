package store

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/forkbox/forkbox/internal/errdefs"
)

// TestSandboxOwnership: a sandbox moves between nodes only by
// TransferSandbox, from its owner and in the state named; afterwards the
// old owner's writes are refused; of nodes racing to take one paused
// sandbox over, exactly one wins.
func TestSandboxOwnership(t *testing.T) { eachBackend(t, testSandboxOwnership) }

func testSandboxOwnership(t *testing.T, s *Store) {
	ctx := context.Background()
	put := func(node, state string) error {
		return s.PutSandbox(ctx, &Sandbox{ID: "sb", ClientID: node, State: state})
	}
	owner := func() string {
		t.Helper()
		sb, err := s.GetSandbox(ctx, "sb")
		if err != nil {
			t.Fatal(err)
		}
		return sb.ClientID
	}
	if err := put("a", "running"); err != nil {
		t.Fatal(err)
	}
	if err := put("b", "running"); !errdefs.IsConflict(err) || owner() != "a" {
		t.Fatalf("node b writes node a's sandbox: %v (owner %s), want a conflict", err, owner())
	}
	if _, err := s.TransferSandbox(ctx, "sb", "a", "b", "paused"); !errdefs.IsConflict(err) {
		t.Errorf("transfer of a running sandbox as paused: %v, want a conflict", err)
	}
	if _, err := s.TransferSandbox(ctx, "sb", "c", "b", "running"); !errdefs.IsConflict(err) {
		t.Errorf("transfer from a node that does not own it: %v, want a conflict", err)
	}
	if _, err := s.TransferSandbox(ctx, "nope", "a", "b", "running"); !errdefs.IsNotFound(err) {
		t.Errorf("transfer of an unknown sandbox: %v, want not found", err)
	}
	if err := put("a", "paused"); err != nil {
		t.Fatal(err)
	}
	moved, err := s.TransferSandbox(ctx, "sb", "a", "b", "paused")
	if err != nil || moved.ClientID != "b" || owner() != "b" {
		t.Fatalf("transfer a→b: %+v %v (owner %s)", moved, err, owner())
	}
	if err := put("a", "resuming"); !errdefs.IsConflict(err) {
		t.Errorf("the old owner writes after the move: %v, want a conflict", err)
	}
	if err := put("b", "paused"); err != nil {
		t.Errorf("the new owner writes: %v", err)
	}
	// Racing takeovers: exactly one of eight nodes gets it.
	var wg sync.WaitGroup
	wins := make(chan string, 8)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			node := fmt.Sprintf("n%d", i)
			if _, err := s.TransferSandbox(ctx, "sb", "b", node, "paused"); err == nil {
				wins <- node
			} else if !errdefs.IsConflict(err) {
				t.Errorf("%s: %v, want a conflict", node, err)
			}
		}()
	}
	wg.Wait()
	close(wins)
	var won []string
	for n := range wins {
		won = append(won, n)
	}
	if len(won) != 1 || owner() != won[0] {
		t.Errorf("racing transfers: winners %v, owner %s; want exactly one, the owner", won, owner())
	}
	// A record from before the node column is anybody's to write.
	if _, err := s.db.ExecContext(ctx, `UPDATE sandboxes SET node = '' WHERE id = ?`, "sb"); err != nil {
		t.Fatal(err)
	}
	if err := put("z", "paused"); err != nil || owner() != "z" {
		t.Errorf("write over a record without a node: %v (owner %s)", err, owner())
	}
}
