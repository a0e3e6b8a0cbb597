package store

import (
	"context"
	"database/sql"
	"encoding/base64"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/forkbox/forkbox/internal/errdefs"
)

// SandboxFilter selects sandboxes for ListSandboxes. Zero values select all.
type SandboxFilter struct {
	// States keeps only sandboxes in one of these states.
	States []string
	// Metadata keeps only sandboxes whose metadata has every pair.
	Metadata map[string]string
	// StartedAfter keeps only sandboxes started at or after it (zero: all).
	StartedAfter time.Time
	// Templates keeps only sandboxes whose template id or alias is listed
	// (nil: all; an empty non-nil slice: none).
	Templates []string
	// IDs keeps only the sandboxes with these ids (nil: all; an empty
	// non-nil slice: none). Callers keep it to a few hundred: each id is a
	// query parameter.
	IDs []string
	// Desc lists the newest first; the default is creation order.
	Desc bool
	// Limit caps the page size (0: no cap).
	Limit int
	// NextToken continues a listing where the previous page ended.
	NextToken string
}

// ListSandboxes returns sandboxes in creation order (which is start order;
// newest first with Desc) and the token of the next page ("" on the last
// page). A token is the position of the page's last sandbox in that order,
// not an offset, so sandboxes created or removed between two pages neither
// repeat nor skip the others.
func (s *Store) ListSandboxes(ctx context.Context, f SandboxFilter) ([]*Sandbox, string, error) {
	if f.Templates != nil && len(f.Templates) == 0 || f.IDs != nil && len(f.IDs) == 0 {
		return nil, "", nil
	}
	pos, err := decodeToken(f.NextToken)
	if err != nil {
		return nil, "", err
	}
	q, order := `SELECT seq, data FROM sandboxes WHERE seq > ?`, ` ORDER BY seq`
	if f.Desc {
		if f.NextToken == "" {
			pos = math.MaxInt64
		}
		q, order = `SELECT seq, data FROM sandboxes WHERE seq < ?`, ` ORDER BY seq DESC`
	}
	args := []any{pos}
	if len(f.States) > 0 {
		q += ` AND state IN (?` + strings.Repeat(",?", len(f.States)-1) + `)`
		for _, st := range f.States {
			args = append(args, st)
		}
	}
	if len(f.IDs) > 0 {
		q += ` AND id IN (?` + strings.Repeat(",?", len(f.IDs)-1) + `)`
		for _, id := range f.IDs {
			args = append(args, id)
		}
	}
	rows, err := s.db.QueryContext(ctx, q+order, args...)
	if err != nil {
		return nil, "", fmt.Errorf("list sandboxes: %w", err)
	}
	defer rows.Close()
	return collectPage(rows, f)
}

// CountSandboxes returns how many sandboxes are in one of states.
func (s *Store) CountSandboxes(ctx context.Context, states []string) (int, error) {
	if len(states) == 0 {
		return 0, nil
	}
	args := make([]any, 0, len(states))
	for _, st := range states {
		args = append(args, st)
	}
	var n int
	err := s.db.QueryRowContext(ctx,
		`SELECT count(*) FROM sandboxes WHERE state IN (?`+strings.Repeat(",?", len(states)-1)+`)`, args...).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count sandboxes: %w", err)
	}
	return n, nil
}

func collectPage(rows *sql.Rows, f SandboxFilter) ([]*Sandbox, string, error) {
	var out []*Sandbox
	var lastSeq int64
	for rows.Next() {
		var seq int64
		var data string
		if err := rows.Scan(&seq, &data); err != nil {
			return nil, "", err
		}
		sb, err := decodeSandbox(data)
		if err != nil {
			return nil, "", err
		}
		if !f.matches(sb) {
			continue
		}
		if f.Limit > 0 && len(out) == f.Limit {
			// There is at least one more match: the page is full.
			return out, encodeToken(lastSeq), rows.Err()
		}
		out = append(out, sb)
		lastSeq = seq
	}
	return out, "", rows.Err()
}

// matches applies the filters SQL does not.
func (f SandboxFilter) matches(sb *Sandbox) bool {
	if !f.StartedAfter.IsZero() && sb.StartedAt.Before(f.StartedAfter) {
		return false
	}
	if f.Templates != nil && !slices.Contains(f.Templates, sb.TemplateID) &&
		(sb.Alias == "" || !slices.Contains(f.Templates, sb.Alias)) {
		return false
	}
	return matchMetadata(sb.Metadata, f.Metadata)
}

func matchMetadata(have, want map[string]string) bool {
	for k, v := range want {
		if got, ok := have[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// Page tokens are opaque to clients; they hide a sequence number.
func encodeToken(seq int64) string {
	return base64.RawURLEncoding.EncodeToString([]byte("s" + strconv.FormatInt(seq, 10)))
}

func decodeToken(tok string) (int64, error) {
	if tok == "" {
		return 0, nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil || len(raw) < 2 || raw[0] != 's' {
		return 0, fmt.Errorf("bad nextToken: %w", errdefs.ErrInvalidArgument)
	}
	seq, err := strconv.ParseInt(string(raw[1:]), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("bad nextToken: %w", errdefs.ErrInvalidArgument)
	}
	return seq, nil
}
