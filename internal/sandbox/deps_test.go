package sandbox

import (
	"testing"

	"github.com/forkbox/forkbox/internal/deptest"
)

// TestDeps: the Manager drives runtimes through the runtime interface only,
// so any backend (gVisor, the fake, a future one) fits under it.
func TestDeps(t *testing.T) {
	deptest.DepChecker{BadDeps: map[string]string{
		"github.com/forkbox/forkbox/internal/runtime/gvisor": "the Manager knows runtimes by their interface",
		"github.com/forkbox/forkbox/internal/netns":          "host networking belongs to the runtime",
		"github.com/forkbox/forkbox/internal/server":         "the core does not know its HTTP edge",
	}}.Check(t)
}
