package store

import (
	"context"
	"fmt"

	"github.com/forkbox/forkbox/internal/errdefs"
)

// This file is where user templates' build records live in a cluster. A
// record has one home node: the one that holds its uploaded files and
// runs its builds; every other node reads the record here (to list it)
// and forwards the template's requests home. The record's data is the
// build service's own (the store does not read it).

// BuildRecord is one template's build record and its home node.
type BuildRecord struct {
	// ID is the template's id; Name its name (unique).
	ID, Name string
	// Node is the home node's id.
	Node string
	// Data is the record as the build service encodes it.
	Data []byte
	// Logs are the tails of its builds' logs, as the build service encodes
	// them. PutBuildRecord writes them; only BuildRecordLogs reads them
	// (a node taking the record over): listings and lookups leave them out.
	Logs []byte
}

// PutBuildRecord writes r, inserting it or replacing the record of the
// same id when r.Node is still its home: a record another node has taken
// over (MoveBuildRecord) is ErrConflict, and a name another record has is
// ErrAlreadyExists — of two nodes creating one name at once, one wins.
func (s *Store) PutBuildRecord(ctx context.Context, r *BuildRecord) error {
	res, err := s.db.ExecContext(ctx, `INSERT INTO builds(id, name, node, data, logs) VALUES(?,?,?,?,?)
		ON CONFLICT(id) DO UPDATE SET name = excluded.name, data = excluded.data, logs = excluded.logs
		WHERE builds.node = excluded.node`,
		r.ID, r.Name, r.Node, string(r.Data), string(r.Logs))
	if err != nil {
		if isUnique(err) {
			return fmt.Errorf("template name %q: %w", r.Name, errdefs.ErrAlreadyExists)
		}
		return fmt.Errorf("put build record %s: %w", r.ID, err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return fmt.Errorf("template %s is held by another node now: %w", r.ID, errdefs.ErrConflict)
	}
	return nil
}

// GetBuildRecord returns the record whose id or name is ref.
func (s *Store) GetBuildRecord(ctx context.Context, ref string) (*BuildRecord, error) {
	var r BuildRecord
	var data string
	err := s.db.QueryRowContext(ctx, `SELECT id, name, node, data FROM builds WHERE id = ? OR name = ?`, ref, ref).
		Scan(&r.ID, &r.Name, &r.Node, &data)
	if isNoRows(err) {
		return nil, notFound("template build record", ref)
	}
	if err != nil {
		return nil, fmt.Errorf("get build record %s: %w", ref, err)
	}
	r.Data = []byte(data)
	return &r, nil
}

// BuildRecordLogs returns the logs of record id (nil if none were
// written); an unknown id is ErrNotFound.
func (s *Store) BuildRecordLogs(ctx context.Context, id string) ([]byte, error) {
	var logs string
	err := s.db.QueryRowContext(ctx, `SELECT logs FROM builds WHERE id = ?`, id).Scan(&logs)
	if isNoRows(err) {
		return nil, notFound("template build record", id)
	}
	if err != nil {
		return nil, fmt.Errorf("get build record logs %s: %w", id, err)
	}
	if logs == "" {
		return nil, nil
	}
	return []byte(logs), nil
}

// ListBuildRecords returns every build record, by name.
func (s *Store) ListBuildRecords(ctx context.Context) ([]*BuildRecord, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, name, node, data FROM builds ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("list build records: %w", err)
	}
	defer rows.Close()
	var out []*BuildRecord
	for rows.Next() {
		var r BuildRecord
		var data string
		if err := rows.Scan(&r.ID, &r.Name, &r.Node, &data); err != nil {
			return nil, fmt.Errorf("list build records: %w", err)
		}
		r.Data = []byte(data)
		out = append(out, &r)
	}
	return out, rows.Err()
}

// DeleteBuildRecord removes record id if node is its home; a missing
// record is not an error, one another node holds is ErrConflict.
func (s *Store) DeleteBuildRecord(ctx context.Context, id, node string) error {
	res, err := s.db.ExecContext(ctx, `DELETE FROM builds WHERE id = ? AND node = ?`, id, node)
	if err != nil {
		return fmt.Errorf("delete build record %s: %w", id, err)
	}
	if n, err := res.RowsAffected(); err == nil && n == 0 {
		if r, err := s.GetBuildRecord(ctx, id); err == nil && r.Node != node {
			return fmt.Errorf("template %s is held by node %s: %w", id, r.Node, errdefs.ErrConflict)
		}
	}
	return nil
}

// MoveBuildRecord makes node to the home of record id, provided from is
// still: of nodes racing to take over a dead node's record, one wins and
// the others get ErrConflict. It returns the record as moved.
func (s *Store) MoveBuildRecord(ctx context.Context, id, from, to string) (*BuildRecord, error) {
	res, err := s.db.ExecContext(ctx, `UPDATE builds SET node = ? WHERE id = ? AND node = ?`, to, id, from)
	if err != nil {
		return nil, fmt.Errorf("move build record %s: %w", id, err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return nil, fmt.Errorf("template %s is not node %s's any more: %w", id, from, errdefs.ErrConflict)
	}
	return s.GetBuildRecord(ctx, id)
}
