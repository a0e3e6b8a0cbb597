// Package store keeps forkbox's metadata (sandboxes, templates, API keys) in
// an embedded SQLite database, or in PostgreSQL for a cluster of daemons
// (OpenURL), so a restarted daemon knows every sandbox it had. It stores
// records; it does not decide anything about them.
package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"

	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/forkbox/forkbox/internal/errdefs"
)

// Store is the metadata database. It is safe for concurrent use.
type Store struct {
	db *db
}

// Open opens (creating if needed) the database in dir and migrates it.
func Open(ctx context.Context, dir string) (*Store, error) {
	return OpenPath(ctx, filepath.Join(dir, "forkbox.db"))
}

// OpenPath opens the database file at path; ":memory:" gives a private
// in-memory database for tests.
func OpenPath(ctx context.Context, path string) (*Store, error) {
	dsn := "file:" + path + "?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=foreign_keys(on)"
	if path == ":memory:" {
		dsn = "file::memory:?_pragma=foreign_keys(on)"
	}
	sqlDB, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	// One connection: SQLite serialises writers anyway, and a single
	// connection makes every transaction see the previous one's writes
	// (and keeps ":memory:" a single database).
	sqlDB.SetMaxOpenConns(1)
	s := &Store{db: &db{DB: sqlDB, d: sqliteDialect}}
	if err := s.migrate(ctx); err != nil {
		sqlDB.Close()
		return nil, err
	}
	return s, nil
}

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }

// migrations are applied in order; the index of the last applied one is kept
// in PRAGMA user_version (SQLite) or the schema_migrations table
// (PostgreSQL, postgres.go). Never edit an applied migration: append a new
// one. They are written in SQLite's types; pgDDL translates the two that
// differ (INTEGER is 64-bit in SQLite, BLOB is BYTEA), so one list serves
// both engines.
var migrations = []string{
	`CREATE TABLE sandboxes (
		id TEXT PRIMARY KEY,
		seq INTEGER NOT NULL,
		state TEXT NOT NULL,
		template_id TEXT NOT NULL,
		end_at INTEGER NOT NULL,
		data TEXT NOT NULL
	);
	CREATE INDEX sandboxes_state ON sandboxes(state, seq);
	CREATE TABLE templates (
		id TEXT PRIMARY KEY,
		seq INTEGER NOT NULL,
		kind TEXT NOT NULL,
		data TEXT NOT NULL
	);
	CREATE TABLE template_aliases (
		alias TEXT PRIMARY KEY,
		template_id TEXT NOT NULL REFERENCES templates(id) ON DELETE CASCADE
	);
	CREATE TABLE api_keys (
		key_hash TEXT PRIMARY KEY,
		name TEXT NOT NULL,
		created_at INTEGER NOT NULL
	);
	CREATE TABLE counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL);`,
	// secrets.go: a secret's value is kept sealed (internal/secrets
	// encrypts it); the store never sees it in the clear.
	`CREATE TABLE secrets (
		id TEXT PRIMARY KEY,
		seq INTEGER NOT NULL,
		name TEXT NOT NULL UNIQUE,
		version INTEGER NOT NULL,
		metadata TEXT NOT NULL,
		sealed BLOB NOT NULL,
		created_at INTEGER NOT NULL,
		updated_at INTEGER NOT NULL
	);`,
	// Volumes (volumes.go): names are unique, as E2B's volumeMounts name them.
	`CREATE TABLE volumes (
		id TEXT PRIMARY KEY,
		seq INTEGER NOT NULL,
		name TEXT NOT NULL UNIQUE,
		data TEXT NOT NULL
	);`,
	// Cluster-wide values (cluster.go): what every daemon sharing the
	// database must agree on, such as its CAs and the API key.
	`CREATE TABLE cluster_values (
		name TEXT PRIMARY KEY,
		value BLOB NOT NULL
	);`,
	// The node registry (nodes.go): one row per daemon of the database.
	// draining is its own column, which heartbeats never write, so an
	// operator's drain survives the node's heartbeats and restarts; the
	// times are Unix milliseconds; data holds what the node reports.
	`CREATE TABLE nodes (
		id TEXT PRIMARY KEY,
		url TEXT NOT NULL,
		draining INTEGER NOT NULL DEFAULT 0,
		started_at INTEGER NOT NULL,
		heartbeat_at INTEGER NOT NULL,
		lease_until INTEGER NOT NULL,
		data TEXT NOT NULL
	);`,
	// A sandbox's node (owner.go): its own column, so a write by a node
	// that no longer owns the sandbox is refused in the same statement
	// (PutSandbox) and a move between nodes is one conditional update
	// (TransferSandbox). '' is a record written before the column.
	`ALTER TABLE sandboxes ADD COLUMN node TEXT NOT NULL DEFAULT '';`,
	// User templates' build records (builds.go): which node holds each
	// (its uploads, its running build) and the record itself without its
	// logs, so every node can list them and route their requests there.
	`CREATE TABLE builds (
		id TEXT PRIMARY KEY,
		name TEXT NOT NULL UNIQUE,
		node TEXT NOT NULL,
		data TEXT NOT NULL
	);`,
	// A cluster's sandbox event logs (events.go), one row per event, so
	// any node reads the log of a sandbox whatever node wrote it; at and
	// added are Unix nanoseconds (the event's time, the write's: the
	// order of events of the same time).
	`CREATE TABLE events (
		sandbox TEXT NOT NULL,
		at INTEGER NOT NULL,
		added INTEGER NOT NULL,
		logger TEXT NOT NULL,
		data TEXT NOT NULL
	);
	CREATE INDEX events_by_sandbox ON events(sandbox, at);`,
	// A build record's log tails (builds.go) beside its data, so listings
	// and lookups, which every forwarded template request makes, do not
	// read them. '' is a record written before the column (its logs, if
	// any, are in its data).
	`ALTER TABLE builds ADD COLUMN logs TEXT NOT NULL DEFAULT '';`,
}

func (s *Store) migrate(ctx context.Context) error {
	if s.db.d == postgresDialect {
		return s.migratePostgres(ctx)
	}
	var version int
	if err := s.db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	if version > len(migrations) {
		return fmt.Errorf("database schema %d is newer than this forkbox (%d): %w", version, len(migrations), errdefs.ErrInternal)
	}
	for i := version; i < len(migrations); i++ {
		tx, err := s.db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, migrations[i]); err != nil {
			tx.Rollback()
			return fmt.Errorf("migration %d: %w", i+1, err)
		}
		if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", i+1)); err != nil {
			tx.Rollback()
			return err
		}
		if err := tx.Commit(); err != nil {
			return err
		}
	}
	return nil
}

// nextSeq returns a monotonically increasing number, used to order listings
// stably (creation order) independent of clocks.
func nextSeq(ctx context.Context, tx *tx, name string) (int64, error) {
	var v int64
	err := tx.QueryRowContext(ctx,
		`INSERT INTO counters(name, value) VALUES(?, 1)
		 ON CONFLICT(name) DO UPDATE SET value = counters.value + 1
		 RETURNING value`, name).Scan(&v)
	return v, err
}

func notFound(kind, id string) error {
	return fmt.Errorf("%s %q: %w", kind, id, errdefs.ErrNotFound)
}

func isNoRows(err error) bool { return errors.Is(err, sql.ErrNoRows) }
