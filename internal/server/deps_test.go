package server

import (
	"testing"

	"github.com/forkbox/forkbox/internal/deptest"
)

// TestDeps: the HTTP edge reaches the domain through sandbox.Manager (and
// an API-key interface) only: never the store, a runtime backend or the
// image store.
func TestDeps(t *testing.T) {
	deptest.DepChecker{BadDeps: map[string]string{
		"github.com/forkbox/forkbox/internal/runtime/gvisor": "the server talks to sandbox.Manager, not a runtime backend",
		"github.com/forkbox/forkbox/internal/netns":          "host networking belongs to the runtime",
	}, BadImports: map[string]string{
		"github.com/forkbox/forkbox/internal/store":  "records are the Manager's; API keys come through Config.Keys",
		"github.com/forkbox/forkbox/internal/images": "images are the Manager's",
	}}.Check(t)
}
