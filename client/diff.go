package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
)

// Change kinds of a FileChange.
const (
	ChangeAdded    = "added"
	ChangeModified = "modified"
	ChangeDeleted  = "deleted"
)

// Apply strategies for paths both sides changed differently.
const (
	StrategyTheirs = "theirs"
	StrategyOurs   = "ours"
)

// FileEntry is a file as a diff compares it (modification times aside).
type FileEntry struct {
	// Type is file, dir, symlink, fifo, char or block.
	Type string `json:"type"`
	// Mode is the permission bits with setuid, setgid and sticky.
	Mode   uint32            `json:"mode"`
	UID    int               `json:"uid"`
	GID    int               `json:"gid"`
	Size   int64             `json:"size,omitempty"`
	SHA256 string            `json:"sha256,omitempty"`
	Link   string            `json:"link,omitempty"`
	Xattrs map[string]string `json:"xattrs,omitempty"`
	Dev    string            `json:"dev,omitempty"`
}

// FileChange is one path that differs.
type FileChange struct {
	Path string `json:"path"`
	// Kind is ChangeAdded, ChangeModified or ChangeDeleted.
	Kind string `json:"kind"`
	// What lists what a modification changed: content, mode, owner, link,
	// xattrs, type.
	What []string `json:"what,omitempty"`
	// Old is the entry in the tree diffed against, New in the one diffed.
	Old *FileEntry `json:"old,omitempty"`
	New *FileEntry `json:"new,omitempty"`
}

// DiffOptions select a diff.
type DiffOptions struct {
	// Against is a sandbox, snapshot or template id; empty: the lineage
	// parent (the snapshot or template the sandbox came from).
	Against string
	// Paths keep only matching paths (globs; a directory covers what it
	// holds); Exclude drops matching ones.
	Paths, Exclude []string
	// NoDefaultExcludes lists /proc, /sys, /dev and /tmp/.X11-unix too.
	NoDefaultExcludes bool
	// Limit is the page size (0: the server's, 1000); Cursor a page's Next.
	Limit  int
	Cursor string
}

func (o DiffOptions) query() url.Values {
	q := url.Values{}
	if o.Against != "" {
		q.Set("against", o.Against)
	}
	q["path"], q["exclude"] = o.Paths, o.Exclude
	if o.NoDefaultExcludes {
		q.Set("defaults", "false")
	}
	if o.Limit > 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	if o.Cursor != "" {
		q.Set("cursor", o.Cursor)
	}
	return q
}

// Diff is one page of changes from Against to ID.
type Diff struct {
	ID      string       `json:"id"`
	Against string       `json:"against"`
	Changes []FileChange `json:"changes"`
	// Next is the cursor of the next page ("" after the last).
	Next string `json:"next,omitempty"`
}

// Diff lists the filesystem changes of sandbox id since o.Against (GET
// /sandboxes/{id}/diff), one page.
func (c *Client) Diff(ctx context.Context, id string, o DiffOptions) (*Diff, error) {
	return c.diff(ctx, "/sandboxes/"+pathID(id)+"/diff", o)
}

// DiffSnapshot is Diff of a snapshot (GET /snapshots/{id}/diff).
func (c *Client) DiffSnapshot(ctx context.Context, id string, o DiffOptions) (*Diff, error) {
	return c.diff(ctx, "/snapshots/"+pathID(id)+"/diff", o)
}

func (c *Client) diff(ctx context.Context, path string, o DiffOptions) (*Diff, error) {
	var d Diff
	if _, err := c.do(ctx, call{method: http.MethodGet, path: path, query: o.query(), out: &d}); err != nil {
		return nil, err
	}
	return &d, nil
}

// DiffAll follows Diff's pages and returns every change.
func (c *Client) DiffAll(ctx context.Context, id string, o DiffOptions) ([]FileChange, error) {
	var all []FileChange
	for {
		d, err := c.Diff(ctx, id, o)
		if err != nil {
			return nil, err
		}
		all = append(all, d.Changes...)
		if d.Next == "" {
			return all, nil
		}
		o.Cursor = d.Next
	}
}

// DiffPatch returns one page of the diff as a unified diff (text files
// as hunks, binary ones named) and the next page's cursor.
func (c *Client) DiffPatch(ctx context.Context, id string, o DiffOptions) (patch, next string, err error) {
	q := o.query()
	q.Set("format", "patch")
	var raw []byte
	h, err := c.do(ctx, call{method: http.MethodGet, path: "/sandboxes/" + pathID(id) + "/diff", query: q, out: &raw})
	if err != nil {
		return "", "", err
	}
	return string(raw), h.Get("X-Next-Token"), nil
}

// ApplyOptions describe an apply.
type ApplyOptions struct {
	// From is the sandbox or snapshot whose changes are brought over.
	From string `json:"from"`
	// Base is what From's changes count from; empty: the common ancestor.
	Base string `json:"base,omitempty"`
	// Paths limit the apply (globs).
	Paths []string `json:"paths,omitempty"`
	// Strategy settles conflicts: StrategyTheirs or StrategyOurs; empty
	// leaves them as they are.
	Strategy string `json:"strategy,omitempty"`
	// DryRun plans without writing.
	DryRun bool `json:"dryRun,omitempty"`
}

// Conflict is a path both sides changed differently.
type Conflict struct {
	Path   string     `json:"path"`
	Base   *FileEntry `json:"base,omitempty"`
	Theirs *FileEntry `json:"theirs,omitempty"`
	Ours   *FileEntry `json:"ours,omitempty"`
	// Resolved is the strategy that settled it, "" if left.
	Resolved string `json:"resolved,omitempty"`
}

// ApplyResult is what an apply did.
type ApplyResult struct {
	ID        string       `json:"id"`
	From      string       `json:"from"`
	Base      string       `json:"base"`
	Applied   []FileChange `json:"applied"`
	Conflicts []Conflict   `json:"conflicts"`
	Unchanged int          `json:"unchanged"`
	DryRun    bool         `json:"dryRun,omitempty"`
	TookMs    int64        `json:"tookMs"`
}

// Apply brings the file changes of o.From since o.Base into running
// sandbox id (POST /sandboxes/{id}/apply), all or nothing. Memory and
// processes are not merged.
func (c *Client) Apply(ctx context.Context, id string, o ApplyOptions) (*ApplyResult, error) {
	var res ApplyResult
	if _, err := c.do(ctx, call{method: http.MethodPost, path: "/sandboxes/" + pathID(id) + "/apply", in: o, out: &res}); err != nil {
		return nil, err
	}
	return &res, nil
}
