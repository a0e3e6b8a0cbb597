package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/forkbox/forkbox/internal/errdefs"
)

// Volume is the persisted record of one named volume: persistent storage
// that outlives the sandboxes mounting it.
type Volume struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// Token is the volume's content-API bearer token, kept in clear:
	// GET /volumes/{id} answers with it, as E2B's does.
	Token string `json:"token"`
	// SizeMB is the volume's size limit.
	SizeMB int `json:"sizeMB"`
	// Node is the host the volume's storage lives on (a cluster places
	// the sandboxes mounting it there).
	Node      string    `json:"node,omitempty"`
	CreatedAt time.Time `json:"createdAt"`
}

// PutVolume inserts a new volume record. A name already taken is
// ErrAlreadyExists.
func (s *Store) PutVolume(ctx context.Context, v *Volume) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode volume: %w", err)
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	seq, err := nextSeq(ctx, tx, "volumes")
	if err != nil {
		return fmt.Errorf("volume seq: %w", err)
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO volumes(id, seq, name, data) VALUES(?,?,?,?)`,
		v.ID, seq, v.Name, string(data))
	if err != nil {
		if isUnique(err) {
			return fmt.Errorf("volume %q: %w", v.Name, errdefs.ErrAlreadyExists)
		}
		return fmt.Errorf("put volume %s: %w", v.ID, err)
	}
	return tx.Commit()
}

// GetVolume returns the volume with id.
func (s *Store) GetVolume(ctx context.Context, id string) (*Volume, error) {
	return s.volumeWhere(ctx, "id", id)
}

// GetVolumeByName returns the volume named name.
func (s *Store) GetVolumeByName(ctx context.Context, name string) (*Volume, error) {
	return s.volumeWhere(ctx, "name", name)
}

func (s *Store) volumeWhere(ctx context.Context, col, val string) (*Volume, error) {
	var data string
	err := s.db.QueryRowContext(ctx, `SELECT data FROM volumes WHERE `+col+` = ?`, val).Scan(&data)
	if isNoRows(err) {
		return nil, notFound("volume", val)
	}
	if err != nil {
		return nil, fmt.Errorf("get volume %s: %w", val, err)
	}
	return decodeVolume(data)
}

// ListVolumes returns every volume in creation order.
func (s *Store) ListVolumes(ctx context.Context) ([]*Volume, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT data FROM volumes ORDER BY seq`)
	if err != nil {
		return nil, fmt.Errorf("list volumes: %w", err)
	}
	defer rows.Close()
	var out []*Volume
	for rows.Next() {
		var data string
		if err := rows.Scan(&data); err != nil {
			return nil, err
		}
		v, err := decodeVolume(data)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// DeleteVolume removes a volume record; a missing one is ErrNotFound.
func (s *Store) DeleteVolume(ctx context.Context, id string) error {
	res, err := s.db.ExecContext(ctx, `DELETE FROM volumes WHERE id = ?`, id)
	if err != nil {
		return fmt.Errorf("delete volume %s: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return notFound("volume", id)
	}
	return nil
}

func decodeVolume(data string) (*Volume, error) {
	var v Volume
	if err := json.Unmarshal([]byte(data), &v); err != nil {
		return nil, fmt.Errorf("decode volume: %w", err)
	}
	return &v, nil
}
