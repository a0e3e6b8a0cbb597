package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Sandbox is a started sandbox as returned by create, connect, fork and
// clone. Use Conn to run commands and access files in it.
type Sandbox struct {
	SandboxID          string `json:"sandboxID"`
	TemplateID         string `json:"templateID,omitempty"`
	Alias              string `json:"alias,omitempty"`
	ClientID           string `json:"clientID,omitempty"`
	EnvdVersion        string `json:"envdVersion,omitempty"`
	EnvdAccessToken    string `json:"envdAccessToken,omitempty"`
	TrafficAccessToken string `json:"trafficAccessToken,omitempty"`
	// Domain is where per-port hosts live (<port>-<id>.<domain>); forkbox
	// usually returns none and the sandbox URL is used instead.
	Domain string `json:"domain,omitempty"`

	c *Client // set by the Client method that returned the value
}

// Conn returns a data-plane connection to the sandbox, authenticated with its
// envd access token. It panics on a Sandbox not obtained from a Client.
func (s *Sandbox) Conn() *SandboxConn {
	if s.c == nil {
		panic("client: Sandbox.Conn on a Sandbox not returned by a Client; use Client.Conn")
	}
	return s.c.Conn(s.SandboxID, s.EnvdAccessToken)
}

// The states SandboxInfo.State reports (and ListOptions.State selects).
const (
	StateRunning = "running"
	StatePaused  = "paused"
)

// SandboxInfo describes a sandbox as listed or inspected.
type SandboxInfo struct {
	SandboxID       string            `json:"sandboxID"`
	TemplateID      string            `json:"templateID"`
	Alias           string            `json:"alias,omitempty"`
	ClientID        string            `json:"clientID,omitempty"`
	State           string            `json:"state"` // StateRunning or StatePaused
	StartedAt       time.Time         `json:"startedAt"`
	EndAt           time.Time         `json:"endAt"`
	CPUCount        int               `json:"cpuCount"`
	MemoryMB        int               `json:"memoryMB"`
	DiskSizeMB      int               `json:"diskSizeMB,omitempty"`
	EnvdVersion     string            `json:"envdVersion,omitempty"`
	EnvdAccessToken string            `json:"envdAccessToken,omitempty"`
	Domain          string            `json:"domain,omitempty"`
	Metadata        map[string]string `json:"metadata,omitempty"`
	// AllowInternetAccess and Network are the egress rules in force.
	AllowInternetAccess *bool         `json:"allowInternetAccess,omitempty"`
	Network             *NetworkRules `json:"network,omitempty"`
	// KillReason is set, with State "killed", for a sandbox that died on
	// its own: "out of memory", "process limit", "crashed" or "killed".
	KillReason string    `json:"killReason,omitempty"`
	KilledAt   time.Time `json:"killedAt,omitzero"`
	// Operation is what the sandbox is busy with ("pausing", "resuming",
	// "snapshotting", "creating", "killing"); empty when idle. Pause
	// returns at once: a pause has finished once Operation is empty.
	Operation string `json:"operation,omitempty"`
	// VolumeMounts are the volumes the sandbox mounts.
	VolumeMounts []VolumeMount `json:"volumeMounts,omitempty"`
}

// VolumeMount mounts volume Name (a name or id) at Path in a sandbox.
type VolumeMount struct {
	Name string `json:"name"`
	Path string `json:"path"`
}

// CreateOptions are the parameters of CreateSandbox. The zero value of every
// field but TemplateID means "server default".
type CreateOptions struct {
	// TemplateID is a template name or id, or a snapshot id (required).
	TemplateID string
	// Timeout is the time to live; rounded up to whole seconds.
	Timeout time.Duration
	// Metadata is attached to the sandbox and can be filtered on in list.
	Metadata map[string]string
	// EnvVars are set for every command run in the sandbox.
	EnvVars map[string]string
	// AutoPause pauses instead of killing the sandbox when it times out.
	AutoPause bool
	// AutoPauseFilesOnly makes that pause keep only the files (E2B's
	// onTimeout keepMemory: false; not with AutoResume).
	AutoPauseFilesOnly bool
	// AutoResume resumes a paused sandbox when data-plane traffic arrives.
	AutoResume bool
	// Secure requires the envd access token on the data plane.
	Secure bool
	// AllowInternet enables or disables outbound internet access; nil keeps
	// the server default.
	AllowInternet *bool
	// Network are the egress rules (see NetworkRules); nil states none (a
	// snapshot's are then inherited).
	Network *NetworkRules
	// IAM are the workload tokens Network's rules may name
	// (TokenPlaceholder); nil: none.
	IAM *IAM
	// CPUCount, MemoryMB and DiskSizeMB (the writable filesystem, / and
	// /tmp) size the sandbox (forkbox extensions); the server refuses sizes
	// beyond its per-sandbox limits, and another disk size or more CPUs
	// than a snapshot's or a user template's image has.
	CPUCount   int
	MemoryMB   int
	DiskSizeMB int
	// VolumeMounts mount volumes into the sandbox, read-write.
	VolumeMounts []VolumeMount
}

type autoResume struct {
	Enabled bool `json:"enabled"`
}

type createRequest struct {
	TemplateID    string            `json:"templateID"`
	Timeout       int               `json:"timeout,omitempty"`
	AutoPause     bool              `json:"autoPause,omitempty"`
	AutoPauseMem  *bool             `json:"autoPauseMemory,omitempty"`
	AutoResume    *autoResume       `json:"autoResume,omitempty"`
	Secure        bool              `json:"secure,omitempty"`
	AllowInternet *bool             `json:"allow_internet_access,omitempty"`
	Network       *NetworkRules     `json:"network,omitempty"`
	IAM           *IAM              `json:"iam,omitempty"`
	Metadata      map[string]string `json:"metadata,omitempty"`
	EnvVars       map[string]string `json:"envVars,omitempty"`
	CPUCount      int               `json:"cpuCount,omitempty"`
	MemoryMB      int               `json:"memoryMB,omitempty"`
	DiskSizeMB    int               `json:"diskSizeMB,omitempty"`
	VolumeMounts  []VolumeMount     `json:"volumeMounts,omitempty"`
}

// CreateSandbox starts a sandbox (POST /sandboxes).
func (c *Client) CreateSandbox(ctx context.Context, o CreateOptions) (*Sandbox, error) {
	if o.TemplateID == "" {
		return nil, fmt.Errorf("create sandbox: %w", errTemplateRequired)
	}
	req := createRequest{
		TemplateID: o.TemplateID, Timeout: seconds(o.Timeout), AutoPause: o.AutoPause,
		Secure: o.Secure, AllowInternet: o.AllowInternet, Metadata: o.Metadata,
		EnvVars: o.EnvVars, CPUCount: o.CPUCount, MemoryMB: o.MemoryMB, Network: o.Network, DiskSizeMB: o.DiskSizeMB,
		IAM:          o.IAM,
		VolumeMounts: o.VolumeMounts,
	}
	if o.AutoResume {
		req.AutoResume = &autoResume{Enabled: true}
	}
	if o.AutoPauseFilesOnly {
		keep := false
		req.AutoPauseMem = &keep
	}
	sb := &Sandbox{}
	if _, err := c.do(ctx, call{method: http.MethodPost, path: "/sandboxes", in: req, out: sb}); err != nil {
		return nil, err
	}
	sb.c = c
	return sb, nil
}

var errTemplateRequired = fmt.Errorf("template id is required: %w", ErrBadRequest)

// GetSandbox returns the details of one sandbox (GET /sandboxes/{id}).
func (c *Client) GetSandbox(ctx context.Context, id string) (*SandboxInfo, error) {
	info := &SandboxInfo{}
	if _, err := c.do(ctx, call{method: http.MethodGet, path: "/sandboxes/" + pathID(id), out: info}); err != nil {
		return nil, err
	}
	return info, nil
}

// ListOptions filter and page ListSandboxes. The zero value lists the first
// page of running and paused sandboxes.
type ListOptions struct {
	// State keeps only sandboxes in these states (StateRunning, StatePaused).
	State []string
	// Metadata keeps only sandboxes carrying all these key/value pairs.
	Metadata map[string]string
	// Limit is the page size (the server caps it at 100).
	Limit int
	// NextToken continues a previous listing.
	NextToken string
	// Order is "asc" (oldest first) or "desc" (newest first, the server's
	// default) by start time.
	Order string
	// StartedAfter keeps only sandboxes started at or after it.
	StartedAfter time.Time
	// Template keeps only sandboxes of this template (an id or a name).
	Template string
}

// ListSandboxes lists sandboxes (GET /v2/sandboxes). It returns one page and
// the token of the next one, empty on the last page.
func (c *Client) ListSandboxes(ctx context.Context, o ListOptions) ([]SandboxInfo, string, error) {
	q := url.Values{}
	if len(o.State) > 0 {
		q.Set("state", strings.Join(o.State, ","))
	}
	if len(o.Metadata) > 0 {
		// The E2B wire format nests a url-encoded k=v&… string in one parameter.
		md := url.Values{}
		for k, v := range o.Metadata {
			md.Set(k, v)
		}
		q.Set("metadata", md.Encode())
	}
	if o.Limit > 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	if o.NextToken != "" {
		q.Set("nextToken", o.NextToken)
	}
	setListOrder(q, o)
	var list []SandboxInfo
	h, err := c.do(ctx, call{method: http.MethodGet, path: "/v2/sandboxes", query: q, out: &list})
	if err != nil {
		return nil, "", err
	}
	return list, h.Get("X-Next-Token"), nil
}

// KillSandbox deletes a sandbox, running or paused (DELETE /sandboxes/{id}).
func (c *Client) KillSandbox(ctx context.Context, id string) error {
	_, err := c.do(ctx, call{method: http.MethodDelete, path: "/sandboxes/" + pathID(id)})
	return err
}

// SetTimeout sets the sandbox's deadline to now+d; it can shorten it
// (POST /sandboxes/{id}/timeout).
func (c *Client) SetTimeout(ctx context.Context, id string, d time.Duration) error {
	in := map[string]int{"timeout": seconds(d)}
	_, err := c.do(ctx, call{method: http.MethodPost, path: "/sandboxes/" + pathID(id) + "/timeout", in: in})
	return err
}

// Refresh extends the sandbox's deadline to at least now+d, never shortening
// it (POST /sandboxes/{id}/refreshes; the server caps d at one hour).
func (c *Client) Refresh(ctx context.Context, id string, d time.Duration) error {
	in := map[string]int{"duration": seconds(d)}
	_, err := c.do(ctx, call{method: http.MethodPost, path: "/sandboxes/" + pathID(id) + "/refreshes", in: in})
	return err
}

// Connect returns a handle to a sandbox, resuming it first when it is paused
// (the call waits for a pause in progress), and extends its deadline to
// now+timeout (POST /sandboxes/{id}/connect).
func (c *Client) Connect(ctx context.Context, id string, timeout time.Duration) (*Sandbox, error) {
	in := map[string]int{"timeout": seconds(timeout)}
	sb := &Sandbox{}
	if _, err := c.do(ctx, call{method: http.MethodPost, path: "/sandboxes/" + pathID(id) + "/connect", in: in, out: sb}); err != nil {
		return nil, err
	}
	if sb.SandboxID == "" {
		sb.SandboxID = id
	}
	sb.c = c
	return sb, nil
}

// Pause persists the sandbox's filesystem and memory and stops it
// (POST /sandboxes/{id}/pause). Resume it with Connect. A sandbox that is
// already paused answers an error matching ErrConflict.
func (c *Client) Pause(ctx context.Context, id string) error {
	_, err := c.do(ctx, call{method: http.MethodPost, path: "/sandboxes/" + pathID(id) + "/pause", in: struct{}{}})
	return err
}

// Metric is one resource-usage sample of a sandbox.
type Metric struct {
	TimestampUnix int64   `json:"timestampUnix"`
	CPUCount      int     `json:"cpuCount"`
	CPUUsedPct    float64 `json:"cpuUsedPct"`
	MemUsed       int64   `json:"memUsed"`
	MemTotal      int64   `json:"memTotal"`
	MemCache      int64   `json:"memCache"` // the guest's page cache
	DiskUsed      int64   `json:"diskUsed"`
	DiskTotal     int64   `json:"diskTotal"`
}

// Metrics returns the sandbox's recent resource-usage samples
// (GET /sandboxes/{id}/metrics), oldest first.
func (c *Client) Metrics(ctx context.Context, id string) ([]Metric, error) {
	var m []Metric
	if _, err := c.do(ctx, call{method: http.MethodGet, path: "/sandboxes/" + pathID(id) + "/metrics", out: &m}); err != nil {
		return nil, err
	}
	return m, nil
}
