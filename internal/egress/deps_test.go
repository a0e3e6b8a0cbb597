package egress

import (
	"testing"

	"github.com/forkbox/forkbox/internal/deptest"
)

// TestDeps: the proxy fills in rules' placeholders through its Expander
// only; what holds secret values and signing keys stays out of it.
func TestDeps(t *testing.T) {
	deptest.DepChecker{BadDeps: map[string]string{
		"github.com/forkbox/forkbox/internal/store":    "records are not the proxy's; values come through Config.Placeholders",
		"github.com/forkbox/forkbox/internal/secrets":  "the vault is the daemon's; values come through Config.Placeholders",
		"github.com/forkbox/forkbox/internal/identity": "the issuer is the daemon's; tokens come through Config.Placeholders",
		"github.com/forkbox/forkbox/internal/sandbox":  "the proxy knows sandboxes by address (Config.Policies)",
	}}.Check(t)
}
