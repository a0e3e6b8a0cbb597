package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/images"
	"github.com/forkbox/forkbox/internal/netpolicy"
)

// Template kinds.
const (
	// KindTemplate is a template built from a root filesystem.
	KindTemplate = "template"
	// KindSnapshot is a captured sandbox state; usable wherever a template is.
	KindSnapshot = "snapshot"
)

// Template is the persisted record of a template or a snapshot.
type Template struct {
	ID      string   `json:"id"`
	Kind    string   `json:"kind"`
	Aliases []string `json:"aliases,omitempty"`
	// RootFS is the read-only root filesystem sandboxes of a built-in
	// template use (a directory of the template cache); a template whose
	// root filesystem is a layer of the image store names it in Content.
	RootFS   string `json:"rootfs"`
	CPUCount int    `json:"cpuCount"`
	MemoryMB int    `json:"memoryMB"`
	// DiskSizeMB is the size of its sandboxes' writable filesystem (in
	// memory), which its image was made with.
	DiskSizeMB int `json:"diskSizeMB"`
	// Content is what sandboxes of the template run on and start from, as
	// references into the image store: at most one layer (their root
	// filesystem, instead of RootFS) and one template image (restored
	// from; none: a cold boot). A snapshot names its source's, which its
	// sandboxes run on; its own checkpoint image is kept by id.
	Content []images.ContentRef `json:"content,omitempty"`
	// ImageDir is the path of a template's image in data dirs made before
	// Content; only the migration at start reads it.
	ImageDir string `json:"imageDir,omitempty"`
	// SourceSandboxID and ParentID record lineage for snapshots.
	SourceSandboxID string    `json:"sourceSandboxID,omitempty"`
	ParentID        string    `json:"parentID,omitempty"`
	Origin          string    `json:"origin,omitempty"`
	CreatedAt       time.Time `json:"createdAt"`
	// ExpiresAt, when set, lets the collector delete an unused snapshot.
	ExpiresAt time.Time `json:"expiresAt,omitzero"`
	// Temporary snapshots are removed when their last user is gone.
	Temporary bool `json:"temporary,omitempty"`
	// ReadyPorts are the ports whose GET /health must answer (besides the
	// agent's) before the template's image is taken.
	ReadyPorts []int `json:"readyPorts,omitempty"`
	// Warmed: the image is a booted agent with nothing else started (the
	// Manager's WarmTemplate made it), so booting the template again makes
	// an image of another shape (sandbox.shapeImage).
	Warmed bool `json:"warmed,omitempty"`
	// AgentArgs, when set, replace the daemon's default first process.
	AgentArgs []string `json:"agentArgs,omitempty"`
	// Volumes are the volumes a snapshot's source had mounted: a snapshot
	// does not copy them, its sandboxes mount the same volumes again.
	Volumes []VolumeMount `json:"volumes,omitempty"`
	// Version changes whenever the template's content is rebuilt.
	Version string `json:"version,omitempty"`
	// Network and AllowInternet are a snapshot's source's egress rules,
	// inherited by sandboxes created from it unless the create says.
	Network       *netpolicy.Rules `json:"network,omitempty"`
	AllowInternet *bool            `json:"allowInternet,omitempty"`
	// Inbound and PrivateTraffic are a snapshot's source's data-plane
	// settings, inherited alike.
	Inbound        *netpolicy.Inbound `json:"inbound,omitempty"`
	PrivateTraffic bool               `json:"privateTraffic,omitempty"`
	// IAM is a snapshot's source's workload tokens, which its rules name.
	IAM *netpolicy.IAM `json:"iam,omitempty"`
}

// PutTemplate inserts or replaces a template and its aliases. An alias held
// by another template is an ErrAlreadyExists.
func (s *Store) PutTemplate(ctx context.Context, t *Template) error {
	data, err := json.Marshal(t)
	if err != nil {
		return err
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	seq, err := nextSeq(ctx, tx, "templates")
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx,
		`INSERT INTO templates(id, seq, kind, data) VALUES(?,?,?,?)
		 ON CONFLICT(id) DO UPDATE SET kind=excluded.kind, data=excluded.data`,
		t.ID, seq, t.Kind, string(data)); err != nil {
		return fmt.Errorf("put template %s: %w", t.ID, err)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM template_aliases WHERE template_id = ?`, t.ID); err != nil {
		return err
	}
	for _, a := range t.Aliases {
		// Insert, then read the owner back: of two puts racing for one
		// alias (on PostgreSQL, in two transactions) the second waits for
		// the first's row and finds it held.
		if _, err := tx.ExecContext(ctx, `INSERT INTO template_aliases(alias, template_id) VALUES(?,?)
			ON CONFLICT(alias) DO NOTHING`, a, t.ID); err != nil {
			return err
		}
		var owner string
		if err := tx.QueryRowContext(ctx, `SELECT template_id FROM template_aliases WHERE alias = ?`, a).Scan(&owner); err != nil {
			return fmt.Errorf("alias %q: %w", a, err)
		}
		if owner != t.ID {
			return fmt.Errorf("alias %q belongs to %s: %w", a, owner, errdefs.ErrAlreadyExists)
		}
	}
	return tx.Commit()
}

// GetTemplate returns a template by id or alias.
func (s *Store) GetTemplate(ctx context.Context, idOrAlias string) (*Template, error) {
	var data string
	err := s.db.QueryRowContext(ctx,
		`SELECT data FROM templates WHERE id = ?
		 UNION ALL
		 SELECT t.data FROM templates t JOIN template_aliases a ON a.template_id = t.id WHERE a.alias = ?
		 LIMIT 1`, idOrAlias, idOrAlias).Scan(&data)
	if isNoRows(err) {
		return nil, notFound("template", idOrAlias)
	}
	if err != nil {
		return nil, fmt.Errorf("get template %s: %w", idOrAlias, err)
	}
	var t Template
	if err := json.Unmarshal([]byte(data), &t); err != nil {
		return nil, err
	}
	return &t, nil
}

// DeleteTemplate removes a template and its aliases.
func (s *Store) DeleteTemplate(ctx context.Context, id string) error {
	res, err := s.db.ExecContext(ctx, `DELETE FROM templates WHERE id = ?`, id)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return notFound("template", id)
	}
	return nil
}

// ListTemplates returns templates of a kind ("" for all) in creation order.
func (s *Store) ListTemplates(ctx context.Context, kind string) ([]*Template, error) {
	rows, err := s.db.QueryContext(ctx,
		`SELECT data FROM templates WHERE ? = '' OR kind = ? ORDER BY seq`, kind, kind)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*Template
	for rows.Next() {
		var data string
		if err := rows.Scan(&data); err != nil {
			return nil, err
		}
		var t Template
		if err := json.Unmarshal([]byte(data), &t); err != nil {
			return nil, err
		}
		out = append(out, &t)
	}
	return out, rows.Err()
}
