package store

import (
	"context"
	"fmt"
)

// ClusterValue returns the cluster-wide value called name; a missing one
// is ErrNotFound.
func (s *Store) ClusterValue(ctx context.Context, name string) ([]byte, error) {
	var v []byte
	err := s.db.QueryRowContext(ctx, `SELECT value FROM cluster_values WHERE name = ?`, name).Scan(&v)
	if isNoRows(err) {
		return nil, notFound("cluster value", name)
	}
	if err != nil {
		return nil, fmt.Errorf("cluster value %s: %w", name, err)
	}
	return v, nil
}

// EnsureClusterValue records value under name unless a value is there
// already, and returns the one recorded: of daemons racing to make a
// cluster-wide value (a CA, the API key), every one gets the first's.
func (s *Store) EnsureClusterValue(ctx context.Context, name string, value []byte) ([]byte, error) {
	if _, err := s.db.ExecContext(ctx,
		`INSERT INTO cluster_values(name, value) VALUES(?, ?) ON CONFLICT(name) DO NOTHING`, name, value); err != nil {
		return nil, fmt.Errorf("cluster value %s: %w", name, err)
	}
	return s.ClusterValue(ctx, name)
}

// Postgres reports whether the store is a PostgreSQL database (shared by
// a cluster of daemons) rather than the data dir's SQLite file.
func (s *Store) Postgres() bool { return s.db.d == postgresDialect }
