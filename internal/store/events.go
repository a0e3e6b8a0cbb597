package store

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// This file is where a cluster keeps its sandboxes' event logs, so a
// sandbox's log reads the same through any node and outlives the node
// that wrote it (a sandbox lost with its node still says what happened).
// An event's data is the event log's own encoding (the store does not
// read it); its time and logger are columns, to order and select by.

// EventRow is one event of a sandbox's log.
type EventRow struct {
	// Time is the event's; Logger names its source.
	Time   time.Time
	Logger string
	// Data is the event as the event log encodes it.
	Data []byte
}

// AppendEvents adds rows to sandbox id's log.
func (s *Store) AppendEvents(ctx context.Context, id string, rows []EventRow) error {
	if len(rows) == 0 {
		return nil
	}
	t, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("append events of %s: %w", id, err)
	}
	defer t.Rollback()
	added := time.Now().UnixNano()
	for i, r := range rows {
		if _, err := t.ExecContext(ctx, `INSERT INTO events(sandbox, at, added, logger, data) VALUES(?,?,?,?,?)`,
			id, r.Time.UnixNano(), added+int64(i), r.Logger, string(r.Data)); err != nil {
			return fmt.Errorf("append events of %s: %w", id, err)
		}
	}
	if err := t.Commit(); err != nil {
		return fmt.Errorf("append events of %s: %w", id, err)
	}
	return nil
}

// ListEvents returns the newest limit events of sandbox id, oldest first.
func (s *Store) ListEvents(ctx context.Context, id string, limit int) ([]EventRow, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT at, logger, data FROM events WHERE sandbox = ?
		ORDER BY at DESC, added DESC LIMIT ?`, id, limit)
	if err != nil {
		return nil, fmt.Errorf("list events of %s: %w", id, err)
	}
	defer rows.Close()
	var out []EventRow
	for rows.Next() {
		var at int64
		var r EventRow
		var data string
		if err := rows.Scan(&at, &r.Logger, &data); err != nil {
			return nil, fmt.Errorf("list events of %s: %w", id, err)
		}
		r.Time, r.Data = time.Unix(0, at), []byte(data)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list events of %s: %w", id, classify(err))
	}
	slices.Reverse(out)
	return out, nil
}

// LastEvent returns the time of the newest event of logger in sandbox
// id's log; zero when there is none.
func (s *Store) LastEvent(ctx context.Context, id, logger string) (time.Time, error) {
	var at *int64
	err := s.db.QueryRowContext(ctx, `SELECT max(at) FROM events WHERE sandbox = ? AND logger = ?`, id, logger).Scan(&at)
	if err != nil {
		return time.Time{}, fmt.Errorf("last event of %s: %w", id, err)
	}
	if at == nil {
		return time.Time{}, nil
	}
	return time.Unix(0, *at), nil
}

// TrimEvents deletes all but the newest keep events of sandbox id.
func (s *Store) TrimEvents(ctx context.Context, id string, keep int) error {
	_, err := s.db.ExecContext(ctx, `DELETE FROM events WHERE sandbox = ? AND at < (
		SELECT at FROM events WHERE sandbox = ? ORDER BY at DESC LIMIT 1 OFFSET ?)`, id, id, keep-1)
	if err != nil {
		return fmt.Errorf("trim events of %s: %w", id, err)
	}
	return nil
}

// DeleteEvents deletes sandbox id's log.
func (s *Store) DeleteEvents(ctx context.Context, id string) error {
	if _, err := s.db.ExecContext(ctx, `DELETE FROM events WHERE sandbox = ?`, id); err != nil {
		return fmt.Errorf("delete events of %s: %w", id, err)
	}
	return nil
}

// EventSandboxes lists the sandboxes whose log has no event written since
// quiet, sorted: the logs the event collection may look at (a sandbox
// being made on another node may log before its record is written).
func (s *Store) EventSandboxes(ctx context.Context, quiet time.Time) ([]string, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT sandbox FROM events GROUP BY sandbox HAVING max(added) < ? ORDER BY sandbox`,
		quiet.UnixNano())
	if err != nil {
		return nil, fmt.Errorf("list event logs: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("list event logs: %w", err)
		}
		out = append(out, id)
	}
	return out, classify(rows.Err())
}
