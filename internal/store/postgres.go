package store

import (
	"context"
	"fmt"
	"net/url"
	"regexp"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/forkbox/forkbox/internal/errdefs"
)

// ConnectTimeout bounds how long OpenURL waits for an unreachable
// PostgreSQL before giving up, when the URL sets no connect_timeout.
const ConnectTimeout = 10 * time.Second

// migrationLock is the key of the advisory lock the schema migrations run
// under, so daemons starting at once on one fresh database apply each
// migration exactly once ("forkbox" in ASCII).
const migrationLock = 0x666f726b626f78

// ParseURL checks a --database URL without connecting: postgres:// and
// postgresql:// URLs are accepted; anything else is ErrInvalidArgument
// with the reason.
func ParseURL(raw string) (*pgx.ConnConfig, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("database URL: %v: %w", err, errdefs.ErrInvalidArgument)
	}
	if u.Scheme != "postgres" && u.Scheme != "postgresql" {
		return nil, fmt.Errorf("database URL %q: scheme %q is not supported (want postgres:// or postgresql://; the default, without --database, is SQLite in the data dir): %w",
			u.Redacted(), u.Scheme, errdefs.ErrInvalidArgument)
	}
	cfg, err := pgx.ParseConfig(raw)
	if err != nil {
		return nil, fmt.Errorf("database URL %q: %v: %w", u.Redacted(), err, errdefs.ErrInvalidArgument)
	}
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = ConnectTimeout
	}
	return cfg, nil
}

// OpenURL opens the PostgreSQL database at a postgres:// URL and migrates
// it. An unreachable server is ErrUnavailable after at most
// ConnectTimeout. Several daemons may open one database at once.
func OpenURL(ctx context.Context, raw string) (*Store, error) {
	cfg, err := ParseURL(raw)
	if err != nil {
		return nil, err
	}
	// pgx's database/sql driver, not pgxpool: every query of the package
	// stays one text for both engines, and database/sql's pool drops a
	// broken connection and dials again, which is the recovery a daemon
	// needs when the database restarts.
	sqlDB := stdlib.OpenDB(*cfg)
	sqlDB.SetMaxOpenConns(16)
	sqlDB.SetMaxIdleConns(4)
	sqlDB.SetConnMaxIdleTime(5 * time.Minute)
	s := &Store{db: &db{DB: sqlDB, d: postgresDialect}}
	pingCtx, cancel := context.WithTimeout(ctx, cfg.ConnectTimeout)
	defer cancel()
	if err := s.db.PingContext(pingCtx); err != nil {
		sqlDB.Close()
		return nil, fmt.Errorf("database %s:%d unreachable: %w", cfg.Host, cfg.Port, classifyConnect(err))
	}
	if err := s.migrate(ctx); err != nil {
		sqlDB.Close()
		return nil, err
	}
	return s, nil
}

// classifyConnect makes any failure to connect at start ErrUnavailable.
func classifyConnect(err error) error {
	if c := classify(err); c != err {
		return c
	}
	return fmt.Errorf("%w: %w", errdefs.ErrUnavailable, err)
}

// migratePostgres applies the missing migrations in one transaction under
// an advisory transaction lock: a daemon that waited for another's lock
// reads the version the other committed and applies nothing twice.
func (s *Store) migratePostgres(ctx context.Context) error {
	t, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	defer t.Rollback()
	if _, err := t.ExecContext(ctx, `SELECT pg_advisory_xact_lock(?)`, int64(migrationLock)); err != nil {
		return fmt.Errorf("migration lock: %w", err)
	}
	if _, err := t.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version BIGINT PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())`); err != nil {
		return fmt.Errorf("schema_migrations: %w", err)
	}
	var version int
	if err := t.QueryRowContext(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&version); err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	if version > len(migrations) {
		return fmt.Errorf("database schema %d is newer than this forkbox (%d): %w", version, len(migrations), errdefs.ErrInternal)
	}
	for i := version; i < len(migrations); i++ {
		if _, err := t.ExecContext(ctx, pgDDL(migrations[i])); err != nil {
			return fmt.Errorf("migration %d: %w", i+1, err)
		}
		if _, err := t.ExecContext(ctx, `INSERT INTO schema_migrations(version) VALUES(?)`, i+1); err != nil {
			return fmt.Errorf("migration %d: %w", i+1, err)
		}
	}
	return t.Commit()
}

var (
	integerType = regexp.MustCompile(`\bINTEGER\b`)
	blobType    = regexp.MustCompile(`\bBLOB\b`)
)

// pgDDL translates a migration written for SQLite into PostgreSQL's types.
func pgDDL(q string) string {
	return blobType.ReplaceAllString(integerType.ReplaceAllString(q, "BIGINT"), "BYTEA")
}
