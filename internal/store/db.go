package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/forkbox/forkbox/internal/errdefs"
)

// dialect is the SQL engine behind a Store. The queries are written once,
// in the subset both engines speak (ON CONFLICT upserts, RETURNING), with
// "?" placeholders; only placeholders and column types differ.
type dialect int

const (
	sqliteDialect dialect = iota
	postgresDialect
)

// db is *sql.DB speaking the Store's dialect: it rewrites placeholders for
// PostgreSQL and marks lost connections as ErrUnavailable, so a request
// made while the database is away answers 503, not 500.
type db struct {
	*sql.DB
	d dialect
}

func (c *db) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	res, err := c.DB.ExecContext(ctx, c.d.rebind(q), args...)
	return res, classify(err)
}

func (c *db) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	rows, err := c.DB.QueryContext(ctx, c.d.rebind(q), args...)
	return rows, classify(err)
}

func (c *db) QueryRowContext(ctx context.Context, q string, args ...any) row {
	return row{c.DB.QueryRowContext(ctx, c.d.rebind(q), args...)}
}

func (c *db) BeginTx(ctx context.Context, opts *sql.TxOptions) (*tx, error) {
	t, err := c.DB.BeginTx(ctx, opts)
	if err != nil {
		return nil, classify(err)
	}
	return &tx{t, c.d}, nil
}

// tx is *sql.Tx speaking the Store's dialect.
type tx struct {
	*sql.Tx
	d dialect
}

func (t *tx) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	res, err := t.Tx.ExecContext(ctx, t.d.rebind(q), args...)
	return res, classify(err)
}

func (t *tx) QueryRowContext(ctx context.Context, q string, args ...any) row {
	return row{t.Tx.QueryRowContext(ctx, t.d.rebind(q), args...)}
}

func (t *tx) Commit() error { return classify(t.Tx.Commit()) }

// row is *sql.Row whose Scan classifies errors.
type row struct{ r *sql.Row }

func (r row) Scan(dest ...any) error { return classify(r.r.Scan(dest...)) }

// rebind turns "?" placeholders into PostgreSQL's "$1, $2, ...". The
// queries of this package hold no "?" inside string literals.
func (d dialect) rebind(q string) string {
	if d != postgresDialect || !strings.Contains(q, "?") {
		return q
	}
	var b strings.Builder
	b.Grow(len(q) + 8)
	n := 0
	for i := 0; i < len(q); i++ {
		if q[i] != '?' {
			b.WriteByte(q[i])
			continue
		}
		n++
		b.WriteByte('$')
		b.WriteString(strconv.Itoa(n))
	}
	return b.String()
}

// classify wraps an error that means "the database is not there" (a
// refused or broken connection, a server shutting down) with
// ErrUnavailable; other errors pass unchanged.
func classify(err error) error {
	if err == nil || errors.Is(err, sql.ErrNoRows) || !unavailable(err) {
		return err
	}
	return fmt.Errorf("database: %w: %w", errdefs.ErrUnavailable, err)
}

func unavailable(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		// Class 08: connection exception; 57P01..57P03: the server is
		// shutting down, crashed or starting up.
		return strings.HasPrefix(pgErr.Code, "08") || strings.HasPrefix(pgErr.Code, "57P")
	}
	var connErr *pgconn.ConnectError
	var netErr net.Error
	return errors.As(err, &connErr) || errors.As(err, &netErr) ||
		errors.Is(err, driver.ErrBadConn) || pgconn.SafeToRetry(err) || pgconn.Timeout(err) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF)
}

// isUnique reports whether err is a unique-constraint violation.
func isUnique(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code == "23505"
	}
	return err != nil && strings.Contains(err.Error(), "UNIQUE")
}
