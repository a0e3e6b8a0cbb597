package identity

import (
	"testing"

	"github.com/forkbox/forkbox/internal/deptest"
)

// TestDeps: the issuer signs for whom it is told; it looks nothing up.
func TestDeps(t *testing.T) {
	deptest.DepChecker{BadDeps: map[string]string{
		"github.com/forkbox/forkbox/internal/sandbox": "the daemon tells the issuer whom a token is for",
		"github.com/forkbox/forkbox/internal/store":   "the issuer's keys are files of the data dir",
		"github.com/forkbox/forkbox/internal/egress":  "the proxy asks for tokens (through the daemon)",
	}}.Check(t)
}
