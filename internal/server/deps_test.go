package server

import (
	"testing"

	"github.com/forkbox/forkbox/internal/deptest"
)

// TestDeps: the HTTP edge reaches the domain through sandbox.Manager only,
// never a runtime backend.
func TestDeps(t *testing.T) {
	deptest.DepChecker{BadDeps: map[string]string{
		"github.com/forkbox/forkbox/internal/runtime/gvisor": "the server talks to sandbox.Manager, not a runtime backend",
		"github.com/forkbox/forkbox/internal/netns":          "host networking belongs to the runtime",
	}}.Check(t)
}
