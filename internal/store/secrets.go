package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/forkbox/forkbox/internal/errdefs"
)

// Secret is the record of one secret: its metadata and its current value
// sealed by internal/secrets (the store holds no key and never sees the
// value in the clear).
type Secret struct {
	ID        string
	Name      string
	Version   int64
	Metadata  map[string]string
	Sealed    []byte
	CreatedAt time.Time
	UpdatedAt time.Time
}

// CreateSecret records a new secret; a taken name is ErrAlreadyExists.
func (s *Store) CreateSecret(ctx context.Context, sec *Secret) error {
	md, err := json.Marshal(nonNil(sec.Metadata))
	if err != nil {
		return err
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	seq, err := nextSeq(ctx, tx, "secrets")
	if err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO secrets(id, seq, name, version, metadata, sealed, created_at, updated_at)
		VALUES(?,?,?,?,?,?,?,?)`, sec.ID, seq, sec.Name, sec.Version, string(md), sec.Sealed,
		sec.CreatedAt.UnixNano(), sec.UpdatedAt.UnixNano())
	if err != nil {
		if isUnique(err) {
			return fmt.Errorf("secret %q: %w", sec.Name, errdefs.ErrAlreadyExists)
		}
		return fmt.Errorf("create secret: %w", err)
	}
	return tx.Commit()
}

const secretCols = `id, seq, name, version, metadata, sealed, created_at, updated_at`

// GetSecret returns the secret whose id or name is ref.
func (s *Store) GetSecret(ctx context.Context, ref string) (*Secret, error) {
	row := s.db.QueryRowContext(ctx, `SELECT `+secretCols+` FROM secrets WHERE id = ? OR name = ?`, ref, ref)
	sec, _, err := scanSecret(row)
	if isNoRows(err) {
		return nil, notFound("secret", ref)
	}
	return sec, err
}

// UpdateSecret replaces the sealed value of the secret whose id or name is
// ref, adds one to its version and, when metadata is not nil, replaces its
// metadata; it returns the updated record.
func (s *Store) UpdateSecret(ctx context.Context, ref string, sealed []byte, metadata map[string]string, now time.Time) (*Secret, error) {
	q := `UPDATE secrets SET sealed = ?, version = version + 1, updated_at = ?`
	args := []any{sealed, now.UnixNano()}
	if metadata != nil {
		md, err := json.Marshal(metadata)
		if err != nil {
			return nil, err
		}
		q += `, metadata = ?`
		args = append(args, string(md))
	}
	args = append(args, ref, ref)
	row := s.db.QueryRowContext(ctx, q+` WHERE id = ? OR name = ? RETURNING `+secretCols, args...)
	sec, _, err := scanSecret(row)
	if isNoRows(err) {
		return nil, notFound("secret", ref)
	}
	return sec, err
}

// DeleteSecret removes the secret whose id or name is ref.
func (s *Store) DeleteSecret(ctx context.Context, ref string) error {
	res, err := s.db.ExecContext(ctx, `DELETE FROM secrets WHERE id = ? OR name = ?`, ref, ref)
	if err != nil {
		return fmt.Errorf("delete secret: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return notFound("secret", ref)
	}
	return nil
}

// ListSecrets returns up to limit secrets in creation order after the page
// token next, and the token of the following page ("" on the last page).
func (s *Store) ListSecrets(ctx context.Context, limit int, next string) ([]*Secret, string, error) {
	pos, err := decodeToken(next)
	if err != nil {
		return nil, "", err
	}
	rows, err := s.db.QueryContext(ctx, `SELECT `+secretCols+` FROM secrets WHERE seq > ? ORDER BY seq LIMIT ?`, pos, limit+1)
	if err != nil {
		return nil, "", fmt.Errorf("list secrets: %w", err)
	}
	defer rows.Close()
	var out []*Secret
	var last int64
	for rows.Next() {
		sec, seq, err := scanSecret(rows)
		if err != nil {
			return nil, "", err
		}
		if len(out) == limit {
			return out, encodeToken(last), rows.Err()
		}
		out, last = append(out, sec), seq
	}
	return out, "", rows.Err()
}

func scanSecret(row interface{ Scan(...any) error }) (*Secret, int64, error) {
	var sec Secret
	var seq, created, updated int64
	var md string
	if err := row.Scan(&sec.ID, &seq, &sec.Name, &sec.Version, &md, &sec.Sealed, &created, &updated); err != nil {
		if err == sql.ErrNoRows {
			return nil, 0, err
		}
		return nil, 0, fmt.Errorf("read secret: %w", err)
	}
	if err := json.Unmarshal([]byte(md), &sec.Metadata); err != nil {
		return nil, 0, fmt.Errorf("secret %s metadata: %w", sec.ID, err)
	}
	sec.CreatedAt, sec.UpdatedAt = time.Unix(0, created).UTC(), time.Unix(0, updated).UTC()
	return &sec, seq, nil
}

func nonNil(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}
