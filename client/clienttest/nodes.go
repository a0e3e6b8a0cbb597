package clienttest

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/forkbox/forkbox/internal/cluster"
	"github.com/forkbox/forkbox/internal/store"
)

// The node the daemon registers as: a cluster of one, as a daemon on
// SQLite is. Its URL is a placeholder no test dials.
const (
	NodeID  = "test-node"
	NodeURL = "http://test-node.invalid:3000"
)

// newNodes registers the daemon's node. Its lease is an hour and nothing
// renews it: a test sees the node alive, however slowly it runs.
func newNodes(t testing.TB, st *store.Store) *cluster.Registry {
	reg, err := cluster.New(cluster.Config{Store: st, NodeID: NodeID, URL: NodeURL, Lease: time.Hour,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Probe: func() store.Report {
			return store.Report{Capacity: 100, CPUs: 2, FreeMemoryMiB: 4096, Version: "clienttest"}
		}})
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.Register(context.Background()); err != nil {
		t.Fatal(err)
	}
	return reg
}

// AddNode records another node of the cluster, as its first heartbeat
// would: alive for an hour, or dead (its lease ran out a minute ago).
func (s *Server) AddNode(id, url string, alive bool) {
	now := time.Now()
	until := now.Add(time.Hour)
	if !alive {
		until = now.Add(-time.Minute)
	}
	n := &store.Node{ID: id, URL: url, StartedAt: now, HeartbeatAt: now, LeaseUntil: until,
		Report: store.Report{Capacity: 10, CPUs: 1, Version: "clienttest"}}
	if _, err := s.st.HeartbeatNode(context.Background(), n); err != nil {
		s.t.Fatalf("clienttest: AddNode: %v", err)
	}
}
