package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/forkbox/forkbox/internal/images"
	"github.com/forkbox/forkbox/internal/netpolicy"
)

// Sandbox is the persisted record of one sandbox. The daemon's state machine
// lives in internal/sandbox; this is only what it needs to survive a restart.
type Sandbox struct {
	ID         string `json:"id"`
	TemplateID string `json:"templateID"`
	Alias      string `json:"alias,omitempty"`
	ClientID   string `json:"clientID"`
	// State is one of the lifecycle states of internal/sandbox.
	State       string            `json:"state"`
	Metadata    map[string]string `json:"metadata,omitempty"`
	EnvVars     map[string]string `json:"envVars,omitempty"`
	CPUCount    int               `json:"cpuCount"`
	MemoryMB    int               `json:"memoryMB"`
	DiskSizeMB  int               `json:"diskSizeMB"`
	EnvdVersion string            `json:"envdVersion"`
	AutoPause   bool              `json:"autoPause"`
	AutoResume  bool              `json:"autoResume"`
	// AutoPauseFilesOnly makes the timeout's pause keep only the files.
	AutoPauseFilesOnly bool `json:"autoPauseFilesOnly,omitempty"`
	Secure             bool `json:"secure"`
	// PrivateTraffic makes the sandbox's ports (other than envd's) require
	// the traffic access token (E2B's network.allowPublicTraffic = false).
	PrivateTraffic bool `json:"privateTraffic,omitempty"`
	// AllowInternet lets the sandbox reach outside the host.
	AllowInternet bool `json:"allowInternet"`
	// Network is the egress rules (allowOut/denyOut, rules, egressProxy)
	// in force, nil if none.
	Network *netpolicy.Rules `json:"network,omitempty"`
	// Inbound is how the data plane reaches the sandbox's ports
	// (maskRequestHost, httpsPorts), nil for the defaults.
	Inbound *netpolicy.Inbound `json:"inbound,omitempty"`
	// IAM is the workload tokens the sandbox's rules may name (E2B's
	// iam.tokens), nil if none. A copy keeps them under its own subject.
	IAM *netpolicy.IAM `json:"iam,omitempty"`
	// EnvdAccessToken guards the data plane when Secure.
	EnvdAccessToken    string    `json:"envdAccessToken,omitempty"`
	TrafficAccessToken string    `json:"trafficAccessToken,omitempty"`
	StartedAt          time.Time `json:"startedAt"`
	EndAt              time.Time `json:"endAt"`
	// ParentID is the sandbox or snapshot this one derives from ("" for a
	// template), Origin the operation that made it (create, fork, clone,
	// restore, rollback).
	ParentID string `json:"parentID,omitempty"`
	Origin   string `json:"origin,omitempty"`
	// AgentArgs is the first process, when the template names its own.
	AgentArgs []string `json:"agentArgs,omitempty"`
	// Rollbacks lists the in-place restores of this sandbox, oldest first.
	Rollbacks []Rollback `json:"rollbacks,omitempty"`
	// RootFS is the built-in template root filesystem the sandbox runs on
	// (kept here so it survives the deletion of the template or snapshot it
	// came from); "" when it runs on a layer of the image store.
	RootFS string `json:"rootfs"`
	// Content is what the sandbox holds in the image store: its template's
	// (or snapshot's) Content, kept while the sandbox lives.
	Content []images.ContentRef `json:"content,omitempty"`
	// ImageDir holds the sandbox's pause image while it is paused.
	ImageDir string `json:"imageDir,omitempty"`
	// RuntimeName is the backend that runs the sandbox.
	RuntimeName string `json:"runtime,omitempty"`
	// Error records why a sandbox was marked dead, for diagnostics.
	Error string `json:"error,omitempty"`
	// KillReason says why a sandbox that died on its own was killed ("out
	// of memory", "process limit", "crashed", "killed"); "" otherwise.
	KillReason string `json:"killReason,omitempty"`
	// KilledAt is when the daemon learnt of that death.
	KilledAt time.Time `json:"killedAt,omitzero"`
	// Volumes are the volumes mounted into the sandbox, in mount order.
	Volumes []VolumeMount `json:"volumes,omitempty"`
}

// VolumeMount is one volume mounted into a sandbox at Path.
type VolumeMount struct {
	VolumeID string `json:"volumeID"`
	Name     string `json:"name"`
	Path     string `json:"path"`
}

// Rollback records one in-place restore of a sandbox to a snapshot.
type Rollback struct {
	SnapshotID string    `json:"snapshotID"`
	At         time.Time `json:"at"`
}

// PutSandbox inserts or replaces a sandbox record.
func (s *Store) PutSandbox(ctx context.Context, sb *Sandbox) error {
	data, err := json.Marshal(sb)
	if err != nil {
		return fmt.Errorf("encode sandbox: %w", err)
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var seq int64
	err = tx.QueryRowContext(ctx, `SELECT seq FROM sandboxes WHERE id = ?`, sb.ID).Scan(&seq)
	if isNoRows(err) {
		seq, err = nextSeq(ctx, tx, "sandboxes")
	}
	if err != nil {
		return fmt.Errorf("sandbox seq: %w", err)
	}
	// The update lands only where the stored record has the writer's
	// node (or none yet): once another node took the sandbox over, the
	// old node's writes are refused instead of undoing the move.
	res, err := tx.ExecContext(ctx,
		`INSERT INTO sandboxes(id, seq, state, template_id, end_at, node, data) VALUES(?,?,?,?,?,?,?)
		 ON CONFLICT(id) DO UPDATE SET state=excluded.state, template_id=excluded.template_id,
		   end_at=excluded.end_at, node=excluded.node, data=excluded.data
		 WHERE sandboxes.node = excluded.node OR sandboxes.node = ''`,
		sb.ID, seq, sb.State, sb.TemplateID, sb.EndAt.UnixNano(), sb.ClientID, string(data))
	if err != nil {
		return fmt.Errorf("put sandbox %s: %w", sb.ID, err)
	}
	if n, err := res.RowsAffected(); err == nil && n == 0 {
		return movedError(ctx, tx, sb.ID, sb.ClientID)
	}
	return tx.Commit()
}

// GetSandbox returns one sandbox record.
func (s *Store) GetSandbox(ctx context.Context, id string) (*Sandbox, error) {
	var data string
	err := s.db.QueryRowContext(ctx, `SELECT data FROM sandboxes WHERE id = ?`, id).Scan(&data)
	if isNoRows(err) {
		return nil, notFound("sandbox", id)
	}
	if err != nil {
		return nil, fmt.Errorf("get sandbox %s: %w", id, err)
	}
	return decodeSandbox(data)
}

// DeleteSandbox removes a sandbox record; a missing one is not an error.
func (s *Store) DeleteSandbox(ctx context.Context, id string) error {
	_, err := s.db.ExecContext(ctx, `DELETE FROM sandboxes WHERE id = ?`, id)
	return err
}

func decodeSandbox(data string) (*Sandbox, error) {
	var sb Sandbox
	if err := json.Unmarshal([]byte(data), &sb); err != nil {
		return nil, fmt.Errorf("decode sandbox: %w", err)
	}
	return &sb, nil
}
