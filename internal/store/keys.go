package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/forkbox/forkbox/internal/errdefs"
)

// API keys are stored hashed: the database never holds a usable key.
func hashKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// AddAPIKey records a key under a name.
func (s *Store) AddAPIKey(ctx context.Context, name, key string, now time.Time) error {
	_, err := s.db.ExecContext(ctx,
		`INSERT INTO api_keys(key_hash, name, created_at) VALUES(?,?,?)`,
		hashKey(key), name, now.UnixNano())
	if isUnique(err) {
		return fmt.Errorf("add api key %q: %w", name, errdefs.ErrAlreadyExists)
	}
	if err != nil {
		return fmt.Errorf("add api key: %w", err)
	}
	return nil
}

// HasAPIKey reports whether key is a known API key.
func (s *Store) HasAPIKey(ctx context.Context, key string) (bool, error) {
	var n int
	err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM api_keys WHERE key_hash = ?`, hashKey(key)).Scan(&n)
	return n > 0, err
}

// CountAPIKeys returns how many keys exist.
func (s *Store) CountAPIKeys(ctx context.Context) (int, error) {
	var n int
	err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM api_keys`).Scan(&n)
	return n, err
}
