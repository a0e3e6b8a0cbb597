package cluster

import (
	"testing"

	"github.com/forkbox/forkbox/internal/deptest"
)

// TestDeps: the registry knows nodes, not what runs on them or how they
// are served; the daemon feeds it (Config.Probe) and the server asks it.
func TestDeps(t *testing.T) {
	deptest.DepChecker{BadDeps: map[string]string{
		"github.com/forkbox/forkbox/internal/sandbox": "the daemon reports the node's sandboxes through Config.Probe",
		"github.com/forkbox/forkbox/internal/server":  "the server asks the registry, not the other way round",
	}, BadImports: map[string]string{
		// The store's record types reach these; the registry itself must not.
		"github.com/forkbox/forkbox/internal/runtime": "runtimes are the Manager's",
		"github.com/forkbox/forkbox/internal/images":  "images are the Manager's",
	}}.Check(t)
}
