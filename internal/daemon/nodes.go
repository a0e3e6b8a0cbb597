package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/forkbox/forkbox/internal/cluster"
	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/images"
	"github.com/forkbox/forkbox/internal/sandbox"
	"github.com/forkbox/forkbox/internal/store"
)

// startRegistry registers this daemon in the node registry of its
// records (on SQLite, a cluster of one) and counts its nodes in the
// metrics. A node that cannot register does not serve: at start the
// records are reachable or the daemon stops with the reason.
func startRegistry(ctx context.Context, o Options, st *store.Store, lns *listeners, mgr *sandbox.Manager, met *metrics, obj *images.ObjectStore) (*cluster.Registry, error) {
	u, err := advertiseURL(o.AdvertiseURL, lns.plain.Addr())
	if err != nil {
		return nil, err
	}
	cfg := cluster.Config{Store: st, NodeID: o.NodeID, URL: u, Logger: o.Logger,
		Heartbeat: o.NodeHeartbeat, Lease: o.NodeLease, Probe: func() store.Report { return nodeReport(mgr, obj) },
		BeforeRemove: mgr.CheckNodeRemovable}
	if st.Postgres() { // other nodes' sandboxes are in the records: lost with their node
		cfg.OnDead = func(ctx context.Context, node string, since time.Time) error {
			_, err := mgr.LoseNode(ctx, node, since)
			return err
		}
		cfg.Answers = nodeAnswers
	}
	var reg *cluster.Registry
	if st.Postgres() && o.ObjectStore != "" { // images shared: drain moves paused sandboxes off
		cfg.WhileDraining = handOffPaused(mgr, &reg, o.Logger)
	}
	reg, err = cluster.New(cfg)
	if err != nil {
		return nil, err
	}
	if err := reg.Register(ctx); err != nil {
		return nil, fmt.Errorf("register node %s: %w", o.NodeID, err)
	}
	met.reg.MustRegister(nodesCollector{reg})
	if st.Postgres() { // other nodes' sandboxes are in the records: forward to them
		mgr.SetNodeDirectory(reg)
	}
	o.Logger.Info("node registered", "node", o.NodeID, "url", u)
	return reg, nil
}

// checkNodeID refuses a node id another running daemon of the shared
// database has (cluster.CheckUnique), before anything reads records as
// this node's: a second node-a would take node-a's running sandboxes for
// its own lost ones. A database of one node (SQLite) has its data dir's
// lock instead.
func checkNodeID(ctx context.Context, o Options, st *store.Store, lns *listeners) error {
	if !st.Postgres() {
		return nil
	}
	u, err := advertiseURL(o.AdvertiseURL, lns.plain.Addr())
	if err != nil {
		return err
	}
	return cluster.CheckUnique(ctx, st, o.NodeID, u, nodeAnswers, time.Now())
}

// advertiseURL is --advertise-url, checked, or http://<the bound listen
// address>, with the host name in place of an unspecified address
// (0.0.0.0 or [::] reach nothing from another host).
func advertiseURL(flag string, bound net.Addr) (string, error) {
	if flag != "" {
		return flag, checkAdvertiseURL(flag)
	}
	host, port, err := net.SplitHostPort(bound.String())
	if err != nil {
		return "", err
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = hostname()
	}
	return "http://" + net.JoinHostPort(host, port), nil
}

// nodeReport is what this node reports in each heartbeat: the host's
// free memory, CPUs and load, the Manager's sandboxes and limit, and the
// images its object-store cache holds (obj; nil without one).
func nodeReport(mgr *sandbox.Manager, obj *images.ObjectStore) store.Report {
	r := cluster.HostReport()
	r.Capacity = mgr.MaxSandboxes()
	for state, n := range mgr.Counts().ByState {
		if state != sandbox.StatePaused {
			r.Running += n
		}
	}
	if obj != nil {
		r.Cached = obj.CachedKeys(reportedCacheKeys)
	}
	return r
}

// reportedCacheKeys bounds the cached images a heartbeat names: every
// placement reads every node's report, and the most recently used are
// the ones a resume or a create of a busy template asks for.
const reportedCacheKeys = 256

// nodesCollector reports the registry's nodes by state, from the listing
// of its last heartbeat (no query per scrape).
type nodesCollector struct{ reg *cluster.Registry }

var descNodes = prometheus.NewDesc("forkbox_cluster_nodes",
	"Nodes of the cluster (the daemons sharing these records) by state: alive, draining or dead.", []string{"state"}, nil)

var (
	descNodeSandboxes = prometheus.NewDesc("forkbox_cluster_node_sandboxes",
		"Sandboxes each node of the cluster runs, as its last heartbeat reported.", []string{"node", "state"}, nil)
	descNodeFreeMemory = prometheus.NewDesc("forkbox_cluster_node_free_memory_bytes",
		"Free memory (MemAvailable) of each node's host, as its last heartbeat reported.", []string{"node", "state"}, nil)
)

// Describe implements prometheus.Collector.
func (c nodesCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descNodes
	ch <- descNodeSandboxes
	ch <- descNodeFreeMemory
}

// Collect implements prometheus.Collector.
func (c nodesCollector) Collect(ch chan<- prometheus.Metric) {
	counts := c.reg.Counts()
	for _, s := range cluster.States {
		ch <- prometheus.MustNewConstMetric(descNodes, prometheus.GaugeValue, float64(counts[s]), string(s))
	}
	for _, n := range c.reg.Last() {
		ch <- prometheus.MustNewConstMetric(descNodeSandboxes, prometheus.GaugeValue, float64(n.Running), n.ID, string(n.State))
		ch <- prometheus.MustNewConstMetric(descNodeFreeMemory, prometheus.GaugeValue, float64(n.FreeMemoryMiB<<20), n.ID, string(n.State))
	}
}

// checkAdvertiseURL refuses an --advertise-url other nodes could not
// reach: one without an http(s) scheme or a host.
func checkAdvertiseURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("--advertise-url %q: want http://host:port or https://host:port: %w", raw, errdefs.ErrInvalidArgument)
	}
	return nil
}

// handOffPaused is a drained node's WhileDraining: its paused sandboxes go
// to the nodes placement picks. A failure (no node takes work) is logged
// once until it changes, not at every heartbeat.
func handOffPaused(mgr *sandbox.Manager, reg **cluster.Registry, log *slog.Logger) func(context.Context) {
	var last string
	return func(ctx context.Context) {
		n, err := mgr.HandOffPaused(ctx, func(ctx context.Context, want []string) (string, error) {
			p, err := (*reg).Place(ctx, want...)
			return p.Node, err
		})
		if n > 0 {
			log.Info("drained node handed its paused sandboxes to others", "sandboxes", n)
		}
		msg := ""
		if err != nil {
			msg = err.Error()
		}
		if msg != last && msg != "" {
			log.Warn("drained node could not hand its paused sandboxes to others; retrying at each heartbeat", "err", err)
		}
		last = msg
	}
}

// nodeAnswers reports whether a node answers HTTP at its URL within
// nodeAnswerTimeout: any answer (even 401) means its daemon runs.
func nodeAnswers(ctx context.Context, url string) bool {
	ctx, cancel := context.WithTimeout(ctx, nodeAnswerTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/health", nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return true
}

// nodeAnswerTimeout bounds nodeAnswers: a killed node refuses at once, a
// host that is gone does not answer at all.
const nodeAnswerTimeout = 5 * time.Second
