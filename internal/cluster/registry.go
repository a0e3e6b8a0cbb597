// Package cluster is the node registry of a forkbox cluster: each daemon
// registers itself in the shared records, heartbeats with its free
// capacity, and counts as dead once its lease runs out. On SQLite the
// registry holds one node: a cluster of one.
//
// It knows nothing of sandboxes or HTTP: the daemon tells it what to
// report (Config.Probe) and the server asks it about nodes.
package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/store"
)

// Defaults of Config.
const (
	DefaultHeartbeat = 2 * time.Second
	DefaultLease     = 10 * time.Second
)

// Store keeps the node records (a *store.Store).
type Store interface {
	HeartbeatNode(ctx context.Context, n *store.Node) (*store.Node, error)
	GetNode(ctx context.Context, id string) (*store.Node, error)
	ListNodes(ctx context.Context) ([]*store.Node, error)
	SetNodeDraining(ctx context.Context, id string, draining bool) (*store.Node, error)
	DeleteNode(ctx context.Context, id string, deadBy time.Time) error
}

// Config configures a Registry. Store, NodeID and URL are required.
type Config struct {
	Store Store
	// NodeID names this node; URL is where the others reach it.
	NodeID string
	URL    string
	// Heartbeat is how often the node renews its lease (0:
	// DefaultHeartbeat); Lease how long one heartbeat keeps it alive (0:
	// DefaultLease). Lease should be several heartbeats, so one slow
	// write does not make a live node look dead.
	Heartbeat time.Duration
	Lease     time.Duration
	// Probe says what the node reports at each heartbeat; nil: the
	// host's memory, CPUs and load (HostReport) and no sandboxes.
	Probe func() store.Report
	// Now is the clock (nil: time.Now); nodes compare leases written by
	// each other's clocks, so the hosts' clocks must agree (NTP).
	Now    func() time.Time
	Logger *slog.Logger
	// OnDead, if set, is told once of each node whose lease ran out
	// (not of one that stopped cleanly: its sandboxes still run and it
	// comes back for them), with when it ran out; an error has it told
	// again at the next heartbeat (reap.go).
	OnDead func(ctx context.Context, node string, since time.Time) error
	// Answers, if set, is asked before OnDead whether the node still
	// answers at its URL: one that does is not declared dead, whatever
	// its lease says (heartbeats late on a loaded host or a slow
	// database must not make its running sandboxes lost).
	Answers func(ctx context.Context, url string) bool
	// WhileDraining, if set, runs after each heartbeat that finds this
	// node drained, in its own goroutine and never twice at once: the
	// node moves its paused work off (the daemon hands it to others).
	WhileDraining func(ctx context.Context)
	// BeforeRemove, if set, may refuse the removal of a dead node (Remove)
	// with the reason: the daemon refuses while the node's running
	// sandboxes are not recorded lost.
	BeforeRemove func(ctx context.Context, node string) error
}

// Registry registers this node, renews its lease and answers who the
// nodes are. It is safe for concurrent use.
type Registry struct {
	cfg     Config
	started time.Time

	mu sync.Mutex
	// draining is this node's flag as last read: what CheckAccepting
	// falls back on while the database is away.
	draining bool
	// nodes is the last listing (every heartbeat), for Counts.
	nodes []Node
	// failing is whether the last heartbeat failed, so an outage is
	// logged once as it starts and once as it ends.
	failing bool
	// healthySince is when this node's heartbeats last started to
	// succeed without a failure since (reap.go).
	healthySince time.Time
	// reaped holds, per dead node told to OnDead, the lease it had then.
	reaped map[string]time.Time
	// picks holds, per node, when Place chose it (place.go).
	picks map[string][]time.Time
	// handing is held while WhileDraining runs.
	handing sync.Mutex
	// lastBeat is when this node's last heartbeat was written; twin the
	// other daemon last seen heartbeating under this node's id (twin.go).
	lastBeat time.Time
	twin     string
}

// New returns a Registry for cfg; nothing is written until Register.
func New(cfg Config) (*Registry, error) {
	if cfg.Store == nil || cfg.NodeID == "" || cfg.URL == "" {
		return nil, fmt.Errorf("node registry needs a store, a node id and a URL: %w", errdefs.ErrInvalidArgument)
	}
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = DefaultHeartbeat
	}
	if cfg.Lease <= 0 {
		cfg.Lease = DefaultLease
	}
	if cfg.Probe == nil {
		cfg.Probe = HostReport
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	now := cfg.Now()
	return &Registry{cfg: cfg, started: now, healthySince: now, reaped: map[string]time.Time{}, picks: map[string][]time.Time{}}, nil
}

// Register writes this node's first heartbeat: a daemon that cannot
// register at start does not serve (its records are unreachable).
func (r *Registry) Register(ctx context.Context) error {
	return r.beat(ctx)
}

// Run renews the lease every Config.Heartbeat until ctx ends, then
// expires it, so the others see a node that stopped cleanly as dead at
// once rather than a lease later. A failed heartbeat is logged and
// retried at the next tick: the node keeps serving through a database
// outage.
func (r *Registry) Run(ctx context.Context) {
	t := time.NewTicker(r.cfg.Heartbeat)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			r.expire(context.WithoutCancel(ctx))
			return
		case <-t.C:
			if err := r.beat(ctx); err != nil && ctx.Err() == nil {
				r.noteFailure(err)
			}
		}
	}
}

// beat writes one heartbeat and refreshes the listing Counts reads.
func (r *Registry) beat(ctx context.Context) error {
	now := r.cfg.Now()
	if err := r.watchTwin(ctx); err != nil {
		return err
	}
	got, err := r.cfg.Store.HeartbeatNode(ctx, r.record(now, now.Add(r.cfg.Lease)))
	if err != nil {
		return err
	}
	list, err := r.cfg.Store.ListNodes(ctx)
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.lastBeat = now
	r.draining = got.Draining
	r.nodes = r.views(list, now)
	if r.failing {
		r.failing = false
		r.healthySince = now
		r.cfg.Logger.Info("node heartbeats recovered", "node", r.cfg.NodeID)
	}
	deaths := r.deathsLocked(now)
	r.mu.Unlock()
	r.reap(ctx, deaths)
	if got.Draining && r.cfg.WhileDraining != nil && r.handing.TryLock() {
		go func() {
			defer r.handing.Unlock()
			r.cfg.WhileDraining(ctx)
		}()
	}
	return nil
}

// noteFailure logs a failed heartbeat: the first of an outage as a
// warning, the rest at debug level (one line every heartbeat would
// bury the log).
func (r *Registry) noteFailure(err error) {
	r.mu.Lock()
	first := !r.failing
	r.failing = true
	r.healthySince = time.Time{}
	r.mu.Unlock()
	level := slog.LevelDebug
	if first {
		level = slog.LevelWarn
	}
	r.cfg.Logger.Log(context.Background(), level, "node heartbeat failed; retrying", "node", r.cfg.NodeID,
		"every", r.cfg.Heartbeat, "err", err)
}

// expire ends the lease of a node that stops cleanly.
func (r *Registry) expire(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.Heartbeat)
	defer cancel()
	now := r.cfg.Now()
	if _, err := r.cfg.Store.HeartbeatNode(ctx, r.record(now, now)); err != nil {
		r.cfg.Logger.Warn("could not end this node's lease; the others see it dead once the lease runs out",
			"node", r.cfg.NodeID, "lease", r.cfg.Lease, "err", err)
	}
}

// record is this node's heartbeat at now, with a lease until until.
func (r *Registry) record(now, until time.Time) *store.Node {
	return &store.Node{ID: r.cfg.NodeID, URL: r.cfg.URL, StartedAt: r.started, HeartbeatAt: now,
		LeaseUntil: until, Report: r.cfg.Probe()}
}
