package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/forkbox/forkbox/internal/errdefs"
)

// Node is the record of one daemon of a cluster (the node registry): what
// it reported in its last heartbeat, and whether an operator drains it.
// Whether it is alive is the reader's to decide, from LeaseUntil.
type Node struct {
	// ID is the daemon's --node-id.
	ID string `json:"-"`
	// URL is where the other nodes reach it (--advertise-url).
	URL string `json:"-"`
	// Draining is set by an operator (SetNodeDraining); heartbeats keep it.
	Draining bool `json:"-"`
	// StartedAt is when the daemon started; HeartbeatAt its last
	// heartbeat; LeaseUntil when it counts as dead without another.
	StartedAt   time.Time `json:"-"`
	HeartbeatAt time.Time `json:"-"`
	LeaseUntil  time.Time `json:"-"`
	Report
}

// Report is what a node says about itself in each heartbeat.
type Report struct {
	// Capacity is the sandboxes it runs at most (--max-sandboxes).
	Capacity int `json:"capacity"`
	// Running is the sandboxes it ran at the heartbeat.
	Running int `json:"running"`
	// FreeMemoryMiB is the host's available memory (MemAvailable).
	FreeMemoryMiB int64 `json:"freeMemoryMiB"`
	// CPUs is the host's CPU count; Load1 its one-minute load average.
	CPUs  int     `json:"cpus"`
	Load1 float64 `json:"load1"`
	// Version is the forkbox build the node runs.
	Version string `json:"version"`
	// Cached names images its local image cache holds (object keys, as
	// images.CacheKey makes them), most recently used first and bounded
	// by the node: placement prefers a node that would not download.
	Cached []string `json:"cached,omitempty"`
}

const nodeColumns = `id, url, draining, started_at, heartbeat_at, lease_until, data`

// HeartbeatNode records n's report and lease, creating its row on the
// first heartbeat, and returns the row as stored: Draining is the
// database's, never n's, so a node learns from its heartbeat that an
// operator drains it.
func (s *Store) HeartbeatNode(ctx context.Context, n *Node) (*Node, error) {
	data, err := json.Marshal(n.Report)
	if err != nil {
		return nil, fmt.Errorf("encode node: %w", err)
	}
	r := s.db.QueryRowContext(ctx, `INSERT INTO nodes(`+nodeColumns+`) VALUES(?,?,0,?,?,?,?)
		ON CONFLICT(id) DO UPDATE SET url=excluded.url, started_at=excluded.started_at,
		  heartbeat_at=excluded.heartbeat_at, lease_until=excluded.lease_until, data=excluded.data
		RETURNING `+nodeColumns,
		n.ID, n.URL, n.StartedAt.UnixMilli(), n.HeartbeatAt.UnixMilli(), n.LeaseUntil.UnixMilli(), string(data))
	got, err := scanNode(r)
	if err != nil {
		return nil, fmt.Errorf("heartbeat of node %s: %w", n.ID, err)
	}
	return got, nil
}

// GetNode returns the node with id; an unknown one is ErrNotFound.
func (s *Store) GetNode(ctx context.Context, id string) (*Node, error) {
	n, err := scanNode(s.db.QueryRowContext(ctx, `SELECT `+nodeColumns+` FROM nodes WHERE id = ?`, id))
	if isNoRows(err) {
		return nil, notFound("node", id)
	}
	if err != nil {
		return nil, fmt.Errorf("get node %s: %w", id, err)
	}
	return n, nil
}

// ListNodes returns every node ever registered (dead ones too), by id.
func (s *Store) ListNodes(ctx context.Context) ([]*Node, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+nodeColumns+` FROM nodes ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	defer rows.Close()
	var out []*Node
	for rows.Next() {
		n, err := scanNode(rows)
		if err != nil {
			return nil, fmt.Errorf("list nodes: %w", classify(err))
		}
		out = append(out, n)
	}
	return out, classify(rows.Err())
}

// SetNodeDraining sets or clears the node's draining flag and returns the
// node; an unknown one is ErrNotFound.
func (s *Store) SetNodeDraining(ctx context.Context, id string, draining bool) (*Node, error) {
	flag := 0
	if draining {
		flag = 1
	}
	res, err := s.db.ExecContext(ctx, `UPDATE nodes SET draining = ? WHERE id = ?`, flag, id)
	if err != nil {
		return nil, fmt.Errorf("drain node %s: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return nil, notFound("node", id)
	}
	return s.GetNode(ctx, id)
}

// DeleteNode removes the node with id from the registry if its lease ran
// out at deadBy or before. An unknown node is ErrNotFound; one whose lease
// runs past deadBy (alive, or back since the caller looked) is
// ErrConflict, and stays. A node that comes back later registers anew.
func (s *Store) DeleteNode(ctx context.Context, id string, deadBy time.Time) error {
	res, err := s.db.ExecContext(ctx, `DELETE FROM nodes WHERE id = ? AND lease_until <= ?`, id, deadBy.UnixMilli())
	if err != nil {
		return fmt.Errorf("remove node %s: %w", id, classify(err))
	}
	if n, _ := res.RowsAffected(); n > 0 {
		return nil
	}
	if _, err := s.GetNode(ctx, id); err != nil {
		return err
	}
	return fmt.Errorf("node %s: its lease runs: %w", id, errdefs.ErrConflict)
}

// scanner is a row or rows.
type scanner interface{ Scan(dest ...any) error }

func scanNode(r scanner) (*Node, error) {
	var (
		n                  Node
		draining           int64
		started, beat, end int64
		data               string
	)
	if err := r.Scan(&n.ID, &n.URL, &draining, &started, &beat, &end, &data); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(data), &n.Report); err != nil {
		return nil, fmt.Errorf("decode node %s: %w", n.ID, err)
	}
	n.Draining = draining != 0
	n.StartedAt, n.HeartbeatAt, n.LeaseUntil = time.UnixMilli(started).UTC(), time.UnixMilli(beat).UTC(), time.UnixMilli(end).UTC()
	return &n, nil
}
