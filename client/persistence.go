package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// SnapshotInfo describes a snapshot: a saved filesystem and memory state that
// can be used as a template id.
type SnapshotInfo struct {
	SnapshotID string   `json:"snapshotID"`
	Names      []string `json:"names"`
	// SandboxID and CreatedAt are forkbox extensions, set when known.
	SandboxID string    `json:"sandboxID,omitempty"`
	CreatedAt time.Time `json:"createdAt,omitzero"`
}

// Snapshot captures the whole state of a running sandbox, which keeps
// running (POST /sandboxes/{id}/snapshots). name is optional.
func (c *Client) Snapshot(ctx context.Context, id, name string) (*SnapshotInfo, error) {
	in := map[string]string{}
	if name != "" {
		in["name"] = name
	}
	out := &SnapshotInfo{}
	if _, err := c.do(ctx, call{method: http.MethodPost, path: "/sandboxes/" + pathID(id) + "/snapshots", in: in, out: out}); err != nil {
		return nil, err
	}
	return out, nil
}

// SnapshotListOptions filter and page ListSnapshots.
type SnapshotListOptions struct {
	// SandboxID keeps only snapshots taken from this sandbox.
	SandboxID string
	// Name keeps only snapshots with this name or id.
	Name string
	// Limit is the page size.
	Limit int
	// NextToken continues a previous listing.
	NextToken string
}

// ListSnapshots lists snapshots (GET /snapshots). It returns one page and the
// token of the next one, empty on the last page.
func (c *Client) ListSnapshots(ctx context.Context, o SnapshotListOptions) ([]SnapshotInfo, string, error) {
	q := url.Values{}
	if o.SandboxID != "" {
		q.Set("sandboxID", o.SandboxID)
	}
	if o.Name != "" {
		q.Set("name", o.Name)
	}
	if o.Limit > 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	if o.NextToken != "" {
		q.Set("nextToken", o.NextToken)
	}
	var list []SnapshotInfo
	h, err := c.do(ctx, call{method: http.MethodGet, path: "/snapshots", query: q, out: &list})
	if err != nil {
		return nil, "", err
	}
	return list, h.Get("X-Next-Token"), nil
}

// DeleteSnapshot deletes a snapshot (DELETE /templates/{id}: snapshots are
// stored as templates). It fails while sandboxes still depend on it.
func (c *Client) DeleteSnapshot(ctx context.Context, snapshotID string) error {
	_, err := c.do(ctx, call{method: http.MethodDelete, path: "/templates/" + pathID(snapshotID)})
	return err
}

// ForkResult is the outcome of one requested fork: exactly one of Sandbox
// and Error is set.
type ForkResult struct {
	Sandbox *Sandbox `json:"sandbox,omitempty"`
	Error   *Error   `json:"error,omitempty"`
}

// Fork derives count copies of a sandbox (POST /sandboxes/{id}/fork). Each
// fork succeeds or fails on its own; see the per-entry results. A zero
// timeout keeps the server default.
func (c *Client) Fork(ctx context.Context, id string, count int, timeout time.Duration) ([]ForkResult, error) {
	in := struct {
		Count   int `json:"count"`
		Timeout int `json:"timeout,omitempty"`
	}{count, seconds(timeout)}
	var out []ForkResult
	if _, err := c.do(ctx, call{method: http.MethodPost, path: "/sandboxes/" + pathID(id) + "/fork", in: in, out: &out}); err != nil {
		return nil, err
	}
	for _, r := range out {
		if r.Sandbox != nil {
			r.Sandbox.c = c
		}
	}
	return out, nil
}

// CloneOptions are the parameters of Clone.
type CloneOptions struct {
	// Count is the number of clones (at least 1).
	Count int
	// Strict makes the call all-or-nothing: if fewer than Count clones start,
	// the ones started are released and the call fails.
	Strict bool
	// Timeout is the clones' time to live; zero inherits the source's
	// remaining time (running source) or the default (paused source).
	Timeout time.Duration
	// Concurrency bounds how many clones the daemon restores at once
	// (0: the daemon's default, which also caps it).
	Concurrency int
}

// CloneResult is the answer of Clone.
type CloneResult struct {
	Sandboxes []*Sandbox `json:"sandboxes"`
	Count     int        `json:"count"`
	// SnapshotTemplateID is the snapshot all clones were started from.
	SnapshotTemplateID string `json:"snapshotTemplateId"`
}

// Clone derives copies of a running or paused sandbox from one snapshot
// (POST /sandboxes/{id}/clone, the Novita-style call).
func (c *Client) Clone(ctx context.Context, id string, o CloneOptions) (*CloneResult, error) {
	if o.Count < 1 {
		return nil, fmt.Errorf("clone %s: count must be at least 1: %w", id, ErrBadRequest)
	}
	in := struct {
		Count       int  `json:"count"`
		Strict      bool `json:"strict"`
		Timeout     int  `json:"timeout,omitempty"`
		Concurrency int  `json:"concurrency,omitempty"`
	}{o.Count, o.Strict, seconds(o.Timeout), o.Concurrency}
	out := &CloneResult{}
	if _, err := c.do(ctx, call{method: http.MethodPost, path: "/sandboxes/" + pathID(id) + "/clone", in: in, out: out}); err != nil {
		return nil, err
	}
	for _, sb := range out.Sandboxes {
		sb.c = c
	}
	if out.Count == 0 {
		out.Count = len(out.Sandboxes)
	}
	return out, nil
}

// CloneAll makes n running copies of a sandbox, at most concurrency
// restored at once, all or nothing: if any copy fails, the ones made are
// released and an error is returned (the mission's clone(n, concurrency)).
func (c *Client) CloneAll(ctx context.Context, id string, n, concurrency int) ([]*Sandbox, error) {
	res, err := c.Clone(ctx, id, CloneOptions{Count: n, Strict: true, Concurrency: concurrency})
	if err != nil {
		return nil, err
	}
	if len(res.Sandboxes) != n {
		// A daemon that ignored strict: undo, keep the promise.
		for _, sb := range res.Sandboxes {
			c.KillSandbox(context.WithoutCancel(ctx), sb.SandboxID)
		}
		return nil, fmt.Errorf("clone %s: %d of %d copies started: %w", id, len(res.Sandboxes), n, ErrConflict)
	}
	return res.Sandboxes, nil
}

// RollbackResult is the answer of Rollback.
type RollbackResult struct {
	SandboxID  string `json:"sandboxID"`
	SnapshotID string `json:"snapshotID"`
	Status     string `json:"status"`
}

// Rollback restores a sandbox in place (same id) to one of its snapshots
// (POST /sandboxes/{id}/rollback). Open data-plane connections must be
// re-established; SandboxConn values stay valid.
func (c *Client) Rollback(ctx context.Context, id, snapshotID string) (*RollbackResult, error) {
	in := map[string]string{"snapshotID": snapshotID}
	out := &RollbackResult{}
	if _, err := c.do(ctx, call{method: http.MethodPost, path: "/sandboxes/" + pathID(id) + "/rollback", in: in, out: out}); err != nil {
		return nil, err
	}
	return out, nil
}
