package secrets

import (
	"testing"

	"github.com/forkbox/forkbox/internal/deptest"
)

// TestDeps: the vault is a layer below the Manager, the egress proxy and
// the HTTP edge, which call it; it calls none of them.
func TestDeps(t *testing.T) {
	deptest.DepChecker{BadDeps: map[string]string{
		"github.com/forkbox/forkbox/internal/sandbox": "the Manager does not own secrets; the vault knows no sandboxes",
		"github.com/forkbox/forkbox/internal/egress":  "the proxy calls the vault (through the daemon), not the other way round",
		"github.com/forkbox/forkbox/internal/server":  "the HTTP edge calls the vault",
	}}.Check(t)
}
