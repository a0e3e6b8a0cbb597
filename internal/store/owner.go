package store

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/forkbox/forkbox/internal/errdefs"
)

// This file is a sandbox's ownership: which node of a cluster runs it
// (Sandbox.ClientID, kept in the node column too). A paused sandbox's
// image is in the shared object store, so any node can take it over; the
// database makes the move atomic, and the node column keeps the old
// owner from writing over it afterwards (PutSandbox).

// TransferSandbox moves sandbox id from node from to node to, provided it
// is still from's and in state: of nodes racing to take one sandbox over,
// exactly one wins and the others get ErrConflict (as does a sandbox that
// changed state or owner meanwhile). It returns the record as moved.
func (s *Store) TransferSandbox(ctx context.Context, id, from, to, state string) (*Sandbox, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	var stored, node, data string
	err = tx.QueryRowContext(ctx, `SELECT state, node, data FROM sandboxes WHERE id = ?`, id).Scan(&stored, &node, &data)
	if isNoRows(err) {
		return nil, notFound("sandbox", id)
	}
	if err != nil {
		return nil, fmt.Errorf("get sandbox %s: %w", id, err)
	}
	sb, err := decodeSandbox(data)
	if err != nil {
		return nil, err
	}
	switch {
	case sb.ClientID != from:
		return nil, fmt.Errorf("sandbox %s is node %s's, not %s's: %w", id, sb.ClientID, from, errdefs.ErrConflict)
	case stored != state:
		return nil, fmt.Errorf("sandbox %s is %s, not %s: %w", id, stored, state, errdefs.ErrConflict)
	}
	sb.ClientID = to
	moved, err := json.Marshal(sb)
	if err != nil {
		return nil, fmt.Errorf("encode sandbox: %w", err)
	}
	// The conditions again in the update: under PostgreSQL's read
	// committed, a racing transfer that committed first makes this one
	// match no row rather than overwrite it.
	res, err := tx.ExecContext(ctx, `UPDATE sandboxes SET node = ?, data = ? WHERE id = ? AND node = ? AND state = ?`,
		to, string(moved), id, node, state)
	if err != nil {
		return nil, fmt.Errorf("move sandbox %s: %w", id, err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return nil, fmt.Errorf("sandbox %s was taken over by another node meanwhile: %w", id, errdefs.ErrConflict)
	}
	if err := tx.Commit(); err != nil {
		return nil, err
	}
	return sb, nil
}

// movedError says why a write of sandbox id by node was refused: the
// stored record belongs to another node.
func movedError(ctx context.Context, tx *tx, id, node string) error {
	var owner string
	if err := tx.QueryRowContext(ctx, `SELECT node FROM sandboxes WHERE id = ?`, id).Scan(&owner); err != nil {
		return fmt.Errorf("put sandbox %s: %w", id, err)
	}
	return fmt.Errorf("sandbox %s moved to node %s; node %q may not write it: %w", id, owner, node, errdefs.ErrConflict)
}
