// Package sandbox is forkbox's core: the Manager owns every sandbox's
// lifecycle (the transition table in states.go), drives the runtime through
// its interface, persists records in the store, and expires sandboxes by TTL.
package sandbox

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/images"
	"github.com/forkbox/forkbox/internal/netpolicy"
	"github.com/forkbox/forkbox/internal/runtime"
	"github.com/forkbox/forkbox/internal/store"
	"github.com/forkbox/forkbox/internal/volumes"
)

// Default values for Config fields left zero.
const (
	DefaultTimeout       = 300 * time.Second
	DefaultMaxTimeout    = 24 * time.Hour
	DefaultSweepInterval = time.Second
	DefaultAgentPort     = 49983
	DefaultEnvdVersion   = "0.6.4"
	DefaultAgentWait     = 20 * time.Second
	// DefaultPoolRefillDelay keeps a refill's restore (~100–300 ms of
	// CPU here) off a new sandbox's first command, and is short enough for
	// a pool of 2 to serve creates a few hundred ms apart (issue 22).
	DefaultPoolRefillDelay = 250 * time.Millisecond
)

// Config configures a Manager. Runtime and Store are required.
type Config struct {
	Runtime runtime.Runtime
	Store   *store.Store
	Logger  *slog.Logger
	// Now is the clock; nil means time.Now. Tests run under testing/synctest.
	Now func() time.Time
	// DefaultTimeout is a sandbox's TTL when the request names none.
	DefaultTimeout time.Duration
	// MaxTimeout bounds every requested TTL.
	MaxTimeout time.Duration
	// SweepInterval is how often the evictor looks for expired sandboxes.
	SweepInterval time.Duration
	// AgentArgs is the first process of every sandbox (the forkbox agent).
	AgentArgs []string
	// AgentPort is the agent's envd port inside the sandbox.
	AgentPort int
	// AgentWait bounds how long Create waits for the agent to answer.
	AgentWait time.Duration
	// EnvdVersion is reported to clients; SDKs gate features on it.
	EnvdVersion string
	// ClientID is reported as the sandboxes' clientID (the node's id,
	// by default the host's name); records of another ClientID in a
	// shared database are another daemon's.
	ClientID string
	// Images keeps pause images and snapshots; nil means an images.Disk
	// rooted at ImageDir. One of the two is required.
	Images images.Store
	// Content keeps the layers and template images sandboxes run on and
	// start from (what templates' and snapshots' Content names); nil
	// means an images.Content rooted at ImageDir, which Recover then
	// collects (with a store of its own, the daemon collects once every
	// owner of references has set them).
	Content images.ContentStore
	// ImageDir roots the default image stores.
	ImageDir string
	// CloneConcurrency bounds parallel restores of one clone operation.
	CloneConcurrency int
	// MaxClones caps count of one fork/clone (the per-host quota).
	MaxClones int
	// Observer, if set, hears of every operation as it ends (observer.go).
	Observer Observer
	// MaxSandboxes caps the sandboxes running at once (quota.go); 0: no cap.
	MaxSandboxes int
	// FreeMemoryMiB, if set, reads the host's available memory: a paused
	// sandbox whose resume would leave less than MinFreeMemoryMiB of it
	// resumes on another node when it can (MoveIfFull).
	FreeMemoryMiB func() int64
	// PoolSize sandboxes of each of PoolTemplates are kept restored ahead
	// of time, so creating one is a hand-over (0: no pool).
	PoolSize      int
	PoolTemplates []string
	// SharedTemplates are the templates every node of a cluster holds
	// (the built-in ones): a create from one may be placed on any node.
	SharedTemplates []string
	// SharedImages says the nodes of the cluster share one object store
	// (and one database): a paused sandbox or a snapshot is usable from
	// every node, so paused sandboxes move between nodes (takeover.go)
	// and a create from any template or snapshot may be placed anywhere.
	SharedImages bool
	// PoolRecent user templates, the most recently built or created
	// from, get a pool of PoolSize too (pool_recent.go; 0: none).
	PoolRecent int
	// PoolRefillDelay is how long after a create the pools are topped up:
	// a refill is a restore, which on a small host competes for the CPUs
	// with the new sandbox's first commands (0: DefaultPoolRefillDelay;
	// negative: at once).
	PoolRefillDelay time.Duration
	// Events keeps every sandbox's event log (events.go); nil keeps it in
	// memory only.
	Events EventLog
	// NetworkOpened are the forbidden ranges (netpolicy.Forbidden) the
	// operator lets egress rules allow.
	NetworkOpened []netip.Prefix
	// CheckNetwork, if set, vets egress rules beyond what netpolicy checks
	// without I/O (the daemon resolves an egress proxy's host); its error
	// fails a create or network update before anything changes.
	CheckNetwork func(ctx context.Context, r netpolicy.Rules) error
	// EgressCA is the PEM certificate of the CA the egress proxy
	// intercepts HTTPS with: every sandbox's agent adds it to the trust
	// store at /init.
	EgressCA []byte
	// CommandPool goes to every agent at /init: how many login shells it
	// keeps ready for commands.run (0: none).
	CommandPool int
	// AgentRequestSlots is how many data-plane requests to agents are let
	// into sandboxes at once; the rest wait in order (gate.go; 0: no gate).
	AgentRequestSlots int
	// NoMemoryWake turns off the memory watch (memwake.go): each agent's
	// out-of-memory guard then paces its own looks.
	NoMemoryWake bool
	// Limits bound each sandbox's cpuCount, memoryMB and diskSizeMB
	// (limits.go); zero fields are unbounded.
	Limits Limits
	// Volumes keeps named volumes' storage (volumes.go); nil: the daemon
	// has no volumes and their calls are ErrUnavailable.
	Volumes *volumes.Host
	// VolumeSizeMB is each new volume's size limit (0:
	// volumes.DefaultSizeMB).
	VolumeSizeMB int
}

// Manager owns the sandboxes of this host. It is safe for concurrent use.
type Manager struct {
	cfg Config
	log *slog.Logger
	rt  runtime.Runtime
	st  records
	img images.Store
	// content keeps layers and template images; collectContent: Recover
	// collects it (the Manager made it).
	content        images.ContentStore
	collectContent bool
	now            func() time.Time

	// agentHTTP reaches agents through the runtime (see agentTransport).
	agentHTTP *http.Client
	// gate admits the data plane's requests to agents (nil: no gate).
	gate *agentGate

	mu sync.Mutex
	// boxes holds every sandbox not yet killed. mu guards the map and every
	// entry's state; an entry's record is only written by the operation
	// holding the entry's claim (a transient state).
	boxes map[string]*entry
	// held counts the requests this node answers for each sandbox (Hold);
	// a drain does not hand a held sandbox to another node. Guarded by mu.
	held map[string]int

	// dataConns are the data plane's open connections, cut when a sandbox
	// stops running.
	dataConns connSet

	// pool holds sandboxes restored ahead of time (pool.go).
	pool pool

	// volMu: DeleteVolume holds it, creates hold it shared until their
	// sandbox is registered (holdVolumes).
	volMu sync.RWMutex

	// evictSem bounds concurrent evictions.
	evictSem chan struct{}

	// exits waits on running sandboxes' supervisors (exits.go).
	exits exitWatch
	// pooledMem are the pooled sandboxes' memory watches (memwake.go).
	pooledMem pooledWatches

	// shapes makes each shaped template image once (shape.go); shapesMu
	// guards shapeUse, when each was last created from.
	shapes   singleflight.Group
	shapesMu sync.Mutex
	// pins keeps snapshot images being read from a delete (snapshot_pins.go).
	pins     snapshotPins
	shapeUse shapeUses
	// layers caches snapshots' file lists for diffs (diff_cache.go).
	layers layerCache

	// bg tracks pauses running after their request returned (background.go).
	bg background

	// nodes is the cluster's directory of nodes (owner.go); nil: one node.
	nodes atomic.Pointer[NodeDirectory]
	// copies spreads clones' copies over the nodes (copies.go); nil: here.
	copies atomic.Pointer[CopyPlacer]
}

// records is what the Manager needs of the store (a *store.Store); tests
// wrap it to make writes fail.
type records interface {
	PutSandbox(ctx context.Context, sb *store.Sandbox) error
	TransferSandbox(ctx context.Context, id, from, to, state string) (*store.Sandbox, error)
	GetSandbox(ctx context.Context, id string) (*store.Sandbox, error)
	ListSandboxes(ctx context.Context, f store.SandboxFilter) ([]*store.Sandbox, string, error)
	CountSandboxes(ctx context.Context, states []string) (int, error)
	PutTemplate(ctx context.Context, t *store.Template) error
	GetTemplate(ctx context.Context, idOrAlias string) (*store.Template, error)
	DeleteTemplate(ctx context.Context, id string) error
	ListTemplates(ctx context.Context, kind string) ([]*store.Template, error)
}

// entry is the in-memory view of one sandbox.
type entry struct {
	rec   store.Sandbox // persisted fields; rec.State mirrors state
	state State
	// done is closed when the operation holding the claim finishes, so
	// callers that must wait (connect during pause) can.
	done chan struct{}
	// from is the state the current claim started from.
	from State
	// gen counts the restores into this id (resume, rollback); see
	// DataPlaneHost.
	gen int
	// lastCPU is the previous CPU reading for metrics' percentages.
	lastCPU     time.Duration
	lastCPUTime time.Time
}

// New returns a Manager; call Recover before serving, then Run.
func New(cfg Config) (*Manager, error) {
	if cfg.Runtime == nil || cfg.Store == nil {
		return nil, fmt.Errorf("sandbox manager needs a runtime and a store: %w", errdefs.ErrInvalidArgument)
	}
	setDefaults(&cfg)
	if err := withEventLog(&cfg); err != nil {
		return nil, err
	}
	ownContent := cfg.Content == nil
	if err := withImages(&cfg); err != nil {
		return nil, err
	}
	m := &Manager{
		cfg:   cfg,
		log:   cfg.Logger,
		rt:    cfg.Runtime,
		st:    cfg.Store,
		img:   cfg.Images,
		now:   cfg.Now,
		boxes: map[string]*entry{},
		held:  map[string]int{},

		content:        cfg.Content,
		collectContent: ownContent,
		shapeUse:       shapeUses{},
		evictSem:       make(chan struct{}, maxConcurrentEvictions),
	}
	m.agentHTTP = &http.Client{Transport: newTransport(m.rt.Dial, false)}
	if cfg.AgentRequestSlots > 0 {
		m.gate = newAgentGate(cfg.AgentRequestSlots)
	}
	return m, nil
}

// withImages gives cfg the default image stores: a Disk and a Content in
// ImageDir.
func withImages(cfg *Config) error {
	if cfg.Images != nil && cfg.Content != nil {
		return nil
	}
	if cfg.ImageDir == "" {
		return fmt.Errorf("sandbox manager needs image stores or a directory: %w", errdefs.ErrInvalidArgument)
	}
	if cfg.Images == nil {
		d, err := images.NewDisk(cfg.ImageDir)
		if err != nil {
			return err
		}
		cfg.Images = d
	}
	if cfg.Content == nil {
		c, err := images.OpenContent(cfg.ImageDir)
		if err != nil {
			return err
		}
		cfg.Content = c
	}
	return nil
}

func setDefaults(cfg *Config) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.DefaultTimeout <= 0 {
		cfg.DefaultTimeout = DefaultTimeout
	}
	if cfg.MaxTimeout <= 0 {
		cfg.MaxTimeout = DefaultMaxTimeout
	}
	if cfg.SweepInterval <= 0 {
		cfg.SweepInterval = DefaultSweepInterval
	}
	if cfg.AgentPort == 0 {
		cfg.AgentPort = DefaultAgentPort
	}
	if cfg.AgentWait <= 0 {
		cfg.AgentWait = DefaultAgentWait
	}
	if cfg.PoolRefillDelay == 0 {
		cfg.PoolRefillDelay = DefaultPoolRefillDelay
	}
	if cfg.EnvdVersion == "" {
		cfg.EnvdVersion = DefaultEnvdVersion
	}
	if cfg.CloneConcurrency <= 0 {
		// Ten 256 MiB clones on 2 cores, same run: all ten restores at
		// once were 0.98× raw runsc's ten at once, four at a time
		// 1.24–1.56× (CPU-bound either way; waves add the tail of each).
		cfg.CloneConcurrency = 10
	}
	if cfg.MaxClones <= 0 {
		cfg.MaxClones = 100
	}
	if cfg.ClientID == "" {
		cfg.ClientID = "forkbox"
	}
	if cfg.VolumeSizeMB <= 0 {
		cfg.VolumeSizeMB = volumes.DefaultSizeMB
	}
}

// Get returns a live sandbox. Killed or unknown sandboxes are ErrNotFound.
func (m *Manager) Get(ctx context.Context, id string) (*Sandbox, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.boxes[id]
	if !ok {
		return nil, fmt.Errorf("sandbox %q: %w", id, errdefs.ErrNotFound)
	}
	return e.view(), nil
}

// ListFilter selects sandboxes for List.
type ListFilter struct {
	// States keeps sandboxes whose public state (running, paused) is listed.
	States []PublicState
	// Metadata keeps sandboxes whose metadata holds every pair.
	Metadata map[string]string
	// Limit caps the page (0: no cap); NextToken continues a listing.
	Limit     int
	NextToken string
	// The filters and order of list.go (GET /v2/sandboxes).
	ListOrder
}

// List returns live sandboxes in creation order (newest first with
// ListOrder.Desc) and the next page's token.
func (m *Manager) List(ctx context.Context, f ListFilter) ([]*Sandbox, string, error) {
	var states []string
	for _, p := range f.States {
		ss, ok := p.states()
		if !ok {
			return nil, "", fmt.Errorf("unknown state %q: %w", p, errdefs.ErrInvalidArgument)
		}
		for _, s := range ss {
			states = append(states, string(s))
		}
	}
	if len(states) == 0 {
		states = liveStates()
	}
	sf := store.SandboxFilter{States: states, Metadata: f.Metadata, Limit: f.Limit, NextToken: f.NextToken}
	if err := m.applyListOrder(ctx, f.ListOrder, &sf); err != nil {
		return nil, "", err
	}
	recs, next, err := m.st.ListSandboxes(ctx, sf)
	if err != nil {
		return nil, "", err
	}
	out := make([]*Sandbox, 0, len(recs))
	for _, r := range recs {
		out = append(out, sandboxOf(r, State(r.State)))
	}
	return out, next, nil
}

func liveStates() []string {
	var out []string
	for s := range transitions {
		if s.Live() {
			out = append(out, string(s))
		}
	}
	return out
}
